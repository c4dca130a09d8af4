// Communicator: an ordered group of ranks over one channel. Each collective call takes the
// next sequence number, and the id keeps apart communicators that share ranks, so calls in
// flight at once, on one communicator or several, never take each other's messages. Arguments
// are checked before anything is sent: a bad one is Error(invalid_argument) naming it.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/membership.h"
#include "collectives/node_layout.h"
#include "collectives/operation.h"
#include "collectives/probe_desk.h"
#include "collectives/registry.h"
#include "collectives/revocation.h"
#include "collectives/tuning.h"
#include "transport/shm/options.h"

namespace ibcoll::collectives {

// A call whose arguments passed, with its algorithm chosen and its sequence numbers taken: it
// must now be started, or run here when its algorithm can (Algorithm::run_here).
struct PreparedCall {
  const Algorithm& algorithm;
  Group group;  // the communicator's members in order: the call check's
  CollectiveArgs args;
  uint64_t tag;
  uint64_t last_tag;  // of the tags the call takes (a hierarchical call takes several sequences)
  bool checked;       // with a separate call check ahead of the algorithm
  Group task_group;   // the algorithm's: in ring order for a ring-ordered one
  int task_root;      // args.root in task_group
  // Follows the call the communicator holds (Communicator::hold), and reports its failure.
  bool follows_held = true;
  bool runs_here() const { return algorithm.run_here && !checked; }
  // Checked without slots, the algorithm is its own call check (Algorithm::make_checked).
  bool self_checking() const {
    return algorithm.make_checked &&
           args.count * type_size(args.type) <= algorithm.checked_max_bytes;
  }
};

struct Policy {
  std::string allreduce_algorithm;  // empty or "auto": by the selection table
  std::string bcast_algorithm;
  bool check_calls = true;  // run the call check beside every collective
  // Checked by messages, a small bcast is light (bcast/light.h) unless its call number is a
  // multiple of this, then checked in full; 1: every one in full.
  int full_check_every = 16;
  std::chrono::milliseconds probe_after{200};  // a wait on one partner before probing it
  ProbeRoster* probe_roster = nullptr;         // the context's: desks with news, served by any call
  // This node's single-copy sizes (measured at start-up): what its members read straight from
  // each other, for the choice on groups inside the node.
  transport::shm::SingleCopySizes single_copy;
  NodeTuning tuning;  // this node's allreduce thresholds, for the same groups
};

class Communicator {
 public:
  // `membership`: the members (shared with the other communicators of the same members); calls
  // take sequence numbers from `first_sequence` (1 at least) up: past those of any earlier
  // communicator with the same id on these members. `slots`: the node's slot region, when every
  // member is on this node. Across nodes, the hierarchical algorithms use `node_slots` (this
  // node's members' share of the slot region) when there is one.
  Communicator(transport::Channel& channel, std::shared_ptr<const Membership> membership,
               uint16_t id, uint64_t first_sequence, Policy policy, std::optional<SlotGroup> slots,
               std::optional<SlotGroup> node_slots);
  ~Communicator();

  int rank() const { return membership_->rank(); }
  int size() const { return membership_->size(); }
  uint16_t id() const { return id_; }
  // The sequence number its next call takes.
  uint64_t next_sequence() const { return next_sequence_; }
  // Lets go of its slot sets with no member of this node to bind them later: the communicator
  // was given up before every member made it (SlotBinding::abandon). Its calls end here.
  void abandon_slots();
  const std::vector<int>& members() const { return membership_->members(); }
  const std::shared_ptr<const Membership>& membership() const { return membership_; }
  // The member indices in the order rings and chains take them.
  std::vector<int> ring_order() const;

  // Checks the arguments (Error(invalid_argument) naming one) and prepares the call. `extra`
  // goes into the call check (a digest that callers such as communicator creation want all
  // ranks to agree on).
  PreparedCall prepare(Collective collective, const CollectiveArgs& args, uint64_t extra = 0);
  std::unique_ptr<Operation> start(const PreparedCall& call);
  std::unique_ptr<Operation> start(Collective collective, const CollectiveArgs& args,
                                   uint64_t extra = 0) {
    return start(prepare(collective, args, extra));
  }
  // A call that returned early (Operation::returned) and runs on: the communicator holds it,
  // and its next call follows it (Operation::after). At most one: a call returns early only
  // once the one before it has ended.
  void hold(std::unique_ptr<Operation> returned);
  // The call it holds, if any (to settle before the communicator goes).
  Operation* held() { return held_.get(); }
  void drop_held() { held_.reset(); }
  const Policy& policy() const { return policy_; }
  // Calls prepared from now on choose by `policy` (every member must change it alike, between
  // the same two calls).
  void set_policy(Policy policy);
  // The algorithm a call of `count` elements of `type` would use.
  const Algorithm& choose(Collective collective, size_t count, DataType type) const;
  // Whether it is revoked (ibcoll_comm_revoke), shared with the context that hears the word.
  const std::shared_ptr<Revocation>& revocation() const { return revocation_; }
  // Its agreements (collectives/agreement.h) are numbered in the order its members make them:
  // the next one's number, taken.
  uint32_t take_agreement_number() { return agreements_made_++; }
  // The members its last agreement held failed (member indices, in order; none before any).
  const std::vector<int>& agreed_failed() const { return agreed_failed_; }
  void set_agreed_failed(std::vector<int> failed) { agreed_failed_ = std::move(failed); }

 private:
  void check_arguments(Collective collective, const CollectiveArgs& args) const;
  void check_forced_algorithms() const;

  transport::Channel& channel_;
  std::shared_ptr<const Membership> membership_;

  uint16_t id_;
  Policy policy_;
  std::optional<SlotGroup> slots_;
  std::unique_ptr<NodeLayout> layout_;  // when the members span nodes
  uint64_t first_sequence_;
  uint64_t next_sequence_;
  std::shared_ptr<Revocation> revocation_;
  uint32_t agreements_made_ = 0;
  std::vector<int> agreed_failed_;
  // Per collective, the algorithms of the last few sizes called, replaced in turn: calls in a
  // loop choose once, also when they alternate sizes (a barrier between timed calls); the
  // algorithm chosen last is logged when it changes.
  struct Choice {
    size_t bytes = 0;
    const Algorithm* algorithm = nullptr;
  };
  struct RecentChoices {
    static constexpr size_t kKept = 4;
    Choice kept[kKept];
    size_t next = 0;  // the one replaced next
    const Algorithm* logged = nullptr;
  };
  const Algorithm& algorithm_for(Collective collective, const CollectiveArgs& args);
  RecentChoices recent_choices_[2];
  // Calls checked by messages: the desk answering partners' probes (made at the first such
  // call), and the light bcasts since the last fully checked call, whose digest that one carries.
  std::unique_ptr<ProbeDesk> probes_;
  uint64_t light_digest_ = 0;
  // Last: it goes first, while the members and channel its messages name are still here.
  std::unique_ptr<Operation> held_;
};

}  // namespace ibcoll::collectives
