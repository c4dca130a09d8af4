// Agreement: a fault-tolerant agreement among a communicator's live members (ibcoll_comm_agree;
// ibcoll_comm_shrink's new id and stamp). Every member that decides decides the same: a fold of
// the values of the members in one view (AND, MAX or OR, word by word) and that view, the
// members held failed, although members fail while it runs, and however far each had got.
//
// A member's view is the members its channel holds failed, and only grows. In a view, the live
// members in order form a binomial tree rooted at the first of them, the leader: values fold up
// it (each member sends its parent the fold of its subtree once all its children have), the
// leader decides, and the decision goes down. Partners act only on a message of their own
// view: one from a view holding members this one does not makes it hold them failed too (the
// channel hears it, and the view moves on); any other is stale. Each member tells its partners
// at distances ±1, ±2, ±4 ... around the members of every failure it learns, so that views meet
// in a few hops whatever connects whom.
//
// Why decisions agree: a member that has decided carries its decision up in every later view,
// and a leader decides afresh only when no member of its view carries one; otherwise it takes
// the one carried. Say member a took decision D in view V and b took E in W, and both live. No
// one holds them failed, so both are live members of both views and reported in each before its
// leader decided; b was in V and in W, and a member's views only grow, so one holds the other:
// say V is inside W. Then a was in V before W; it acts on its own view's messages alone, so it
// took D before it reported in W, carried D up there, and W's leader took D: E is D. A member
// held failed that lives is fenced out (Channel::fence): it is told, its word is no longer
// heeded, and it is no survivor. So the leader's death, or any member's, mid-way only moves the
// agreement to a next view, where those that decided pass their decision on.
//
// A member may leave as soon as it has decided (early return): the agreement stays, advanced by
// its context's progress, for members that decide later. What a member waits on (a child's
// fold, its parent's decision) proves it alive by any message or a heartbeat (Notice agreeing,
// sent every `heartbeat` while undecided); a partner silent for `fence_after` while this member
// is undecided is fenced out. A member that was itself stopped that long (its own advances
// that far apart) fences no one: it gives its partners the time again.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectives/agreement_message.h"
#include "collectives/membership.h"
#include "transport/channel.h"

namespace ibcoll::collectives {

class Agreement {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Fold : uint8_t { bitwise_and = 1, maximum = 2, bitwise_or = 3 };
  struct Settings {
    std::chrono::milliseconds fence_after{600000};
    std::chrono::milliseconds heartbeat{1000};
    uint64_t exit_after_messages = 0;  // for tests: SIGKILL after sending this many (0: never)
  };

  // Agreement `instance` (the communicator's agreements, numbered from 0 in the same order on
  // every member) on the communicator of `membership` with `key` and `id`, over this member's
  // `mine` (at most kMostAgreementValues words, the same count on every member).
  Agreement(transport::Channel& channel, std::shared_ptr<const Membership> membership, uint64_t key,
            uint16_t id, uint32_t instance, Fold fold, std::vector<uint64_t> mine,
            Settings settings);
  ~Agreement();  // withdraws what it has posted
  Agreement(const Agreement&) = delete;
  Agreement& operator=(const Agreement&) = delete;

  // Moves as far as arrivals allow; never blocks.
  void advance();
  bool decided() const { return decision_.has_value(); }
  const AgreementDecision& decision() const { return *decision_; }
  // Why it cannot go on here (this rank was fenced out; a member made another call), or ok.
  const Status& failure() const { return failure_; }
  bool ended() const { return decided() || !failure_.ok(); }
  uint64_t key() const { return key_; }
  uint32_t instance() const { return instance_; }
  // A heartbeat from job rank `peer`: it lives, in this agreement.
  void heard_from(int peer);
  // "agreement #2 on communicator 5 of 8 ranks: in the view holding 1 failed, it waits for
  // member 3 (job rank 9)".
  std::string describe() const;

 private:
  struct Partner {
    int member = -1;
    bool child = false;  // a child sends its fold up; the parent, the decision down
    std::vector<std::byte> inbox;
    bool arrived = false;  // its receive completed (status, bytes): advance() reads it
    Status status;
    size_t bytes = 0;
    bool reported = false;  // its message of this view came
    Clock::time_point last_heard;
  };

  int peer_of(int member) const { return membership_->members()[static_cast<size_t>(member)]; }
  // The tag of this view's messages of `kind` (the view the member is in: view_ may have grown).
  uint64_t tag(uint8_t kind) const;
  // Whether the channel holds members failed that the view does not (it then holds them too).
  bool learn_failures();
  void enter_view();
  void post(size_t partner);
  void take(size_t partner);
  void accept(const AgreementDecision& decision);
  void send_when_ready();
  void send(int member, const AgreementMessage& message);
  void keep_alive(Clock::time_point now);
  void spread(int failed_member);
  void fail(Status why);
  void withdraw_view();

  transport::Channel& channel_;
  std::shared_ptr<const Membership> membership_;
  uint64_t key_;
  uint16_t id_;
  uint32_t instance_;
  Fold fold_;
  std::vector<uint64_t> mine_;
  Settings settings_;
  size_t inbox_bytes_;

  MemberSet view_;
  MemberSet spread_;  // failures told to the partners around the ring
  size_t failures_seen_ = 0;
  bool in_view_ = false;
  uint64_t views_entered_ = 0;
  int failed_in_view_ = 0;  // the failures of the view it is in, which name its tags
  bool view_grew_ = false;  // a message held members failed that the view did not
  int position_ = 0;        // among the live members
  std::vector<Partner> partners_;
  std::vector<uint64_t> fold_values_;         // this member's and its reported children's
  std::optional<AgreementDecision> carried_;  // a decision one of them had seen
  std::optional<AgreementDecision> decision_;
  bool sent_up_ = false, sent_down_ = false;
  std::vector<std::vector<std::byte>> outbox_;  // this view's sends, until withdrawn
  uint64_t messages_sent_ = 0;
  Clock::time_point last_advance_, next_heartbeat_;
  Status failure_;
};

}  // namespace ibcoll::collectives
