// ProbeDesk: keeps a member that waits on a partner's message from waiting forever when that
// partner made another call. Small bcasts across nodes send nothing back towards their root
// (bcast/light.h), so a member can wait on a partner that will not send: one that took another
// rank for the root, made an allreduce, or has returned. Per communicator, one standing receive
// from each doubling partner (the only members a doubling exchange waits on: log2(p) + 1 at
// most). A member that has waited IBCOLL_PROBE_AFTER on a partner in call N sends it a probe:
// N and the fields of its call. The partner answers only when its call N differs or failed
// here, with its fields; the prober folds them in and fails with the check's verdict, and so
// does the partner's call N if it waits too (two ranks that each wait on the other). A partner
// whose call agrees is slow, and is waited for; a probe about a call it has not made yet waits
// for that call. Probes are served while any call of this member's runs, on any communicator
// (ProbeRoster), so a partner idle outside the library answers at its next call. A member whose
// call fails with a mismatch tells every partner at once, unasked: one that waits on it fails
// without waiting out a probe interval (a chain of waits then unwinds at the network's speed), even
// if the failed member leaves the job right after.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/deadline.h"
#include "collectives/call_check.h"
#include "collectives/check_fields.h"
#include "transport/channel.h"

namespace ibcoll::collectives {

class ProbeDesk;

// The desks of one context where a partner's note came: served from the context's progress
// loop, whichever communicator's call runs. A partner may wait on this rank in a call it has
// ended, while this rank waits in a call on another communicator, possibly on that partner.
class ProbeRoster {
 public:
  ProbeRoster() = default;
  ProbeRoster(const ProbeRoster&) = delete;
  ProbeRoster& operator=(const ProbeRoster&) = delete;
  // Serves each desk listed; cheap when none is. A desk that fails to (its channel refused a
  // send) is left to its own communicator's next call, which meets the failure where it belongs.
  void serve_all();

 private:
  friend class ProbeDesk;
  std::vector<ProbeDesk*> listed_;
};

class ProbeDesk {
 public:
  // What a waiting task keeps between its looks (wait_on).
  struct Timer {
    Clock::time_point probe_at{};  // the next probe; unset until the wait is first seen
    uint32_t looks = 0;
  };

  // `peers`: the members' channel ranks (the communicator's list, which outlives the desk);
  // probes travel under the communicator `id`'s sequence 0, which no call takes. `roster`
  // (which outlives the desk; may be null): where the desk is listed when a note comes.
  ProbeDesk(transport::Channel& channel, std::span<const int> peers, int rank, uint16_t id,
            uint64_t first_sequence, std::chrono::milliseconds after, ProbeRoster* roster);
  ~ProbeDesk();
  ProbeDesk(const ProbeDesk&) = delete;
  ProbeDesk& operator=(const ProbeDesk&) = delete;

  // This member's call taking sequences [first, last] (in order: each past the last).
  void record(uint64_t first, uint64_t last, const CallSignature& signature);
  // This member's call `sequence` ended with `verdict`, `fields` folded in. A mismatch: every
  // partner is told (one that waits on it in that call fails at once, with no probe), and
  // probes get them.
  void ended(uint64_t sequence, const Status& verdict, const CheckFields& fields);
  // Answers the probes that came and can be answered.
  void serve();
  // From a task whose receive from `member` in call `sequence` has not come: serves, probes
  // `member` each `after` of waiting; once `member` has answered, or a partner's probe showed
  // that its call `sequence` differs, folds its fields into `fields` and returns the mismatch
  // the call fails with, already told as ended() tells it (else ok: wait on). Call it no more
  // once it has returned a mismatch.
  Status wait_on(Timer& timer, int member, uint64_t sequence, CheckFields& fields);

 private:
  static constexpr size_t kKept = 64;  // calls remembered; a partner is at most a few behind
  // An answer: the call differs; it failed here (a mismatch among other ranks).
  enum class Kind : uint64_t { probe = 1, differs = 2, failed = 3 };
  struct Note {
    uint64_t sequence = 0;
    Kind kind = Kind::probe;
    std::array<std::byte, CheckFields::kFullBytes> fields{};
  };
  static constexpr size_t kNoteHeader = 2 * sizeof(uint64_t);
  struct Partner {
    int member = 0;
    Note in, out, probe, answer;  // the receive's room, the send's, the last probe and answer
    size_t probe_bytes = 0, answer_bytes = 0;
    bool probe_waits = false, has_answer = false;
    uint64_t notice = 0;  // a failed call of this member's to tell the partner of, unasked
    bool receiving = false, sending = false, closed = false;
  };
  struct Call {
    uint64_t first = 0, last = 0;
    CallSignature signature{};
    bool failed = false;
  };

  void failed(uint64_t sequence, const CheckFields& fields);
  Partner* partner(int member);
  void post_receive(size_t index);
  // What the channel's completions touch, shared with them: a completion the channel deferred
  // may run after the desk is gone (what it withdrew never runs).
  struct Shared {
    std::vector<Partner> partners;
    bool news = true;  // a receive completed (or none is posted yet): serve() has work
    uint64_t first_sequence = 0;
    ProbeDesk* desk = nullptr;  // null once the desk is gone
    ProbeRoster* roster = nullptr;
    bool listed = false;  // in roster's list
  };
  static void arrived(Shared& shared, size_t index, const Status& status, size_t bytes);
  // Lists the desk in its roster: it has news to serve, whichever call runs.
  static void list(Shared& shared);
  // Answers partners_[index]'s probe if this member has made that call: whether it is settled.
  bool answer(Partner& p);
  void send(size_t index, uint64_t sequence, Kind kind, const CheckFields* fields);
  const CheckFields* failure_of(uint64_t sequence) const;  // null if not among failures_

  friend class ProbeRoster;
  transport::Channel& channel_;
  std::span<const int> peers_;
  uint64_t tag_;
  std::chrono::milliseconds after_;
  std::shared_ptr<Shared> shared_;
  std::vector<Partner>& partners_;   // shared_'s
  std::array<Call, kKept> calls_{};  // by sequence, in turn
  size_t calls_kept_ = 0;
  uint64_t next_sequence_;  // the first sequence this member has not made a call of
  // The last few calls that failed here, with the fields they ended with (what differed).
  struct Failure {
    uint64_t sequence = 0;
    CheckFields fields;
  };
  std::array<Failure, 4> failures_{};
  size_t failures_kept_ = 0;
  // The last call a partner's probe showed to differ: the partner, and its probe.
  uint64_t differing_sequence_ = 0;
  int differing_member_ = -1;
  Note differing_probe_;
  size_t differing_bytes_ = 0;
};

}  // namespace ibcoll::collectives
