// Operation: one collective call in flight: first the call check, then the algorithm's task.
// The algorithm starts only once every rank has been seen to make the same call, so ranks that
// disagree all fail with the check's verdict before any of the caller's data moves (and no
// message of a mismatched call can land in a buffer afterwards). A call that fails or is given
// up on withdraws its posted receives; a member the transport has declared failed fails it.
//
// A blocking call may return early (return_early): once its task needs nothing more of the
// caller's buffers and no member waits on it (a small bcast's root, its messages posted), its
// caller has it back while it runs on, held by its communicator; that communicator's next
// call follows it (after): it ends only after the earlier one, and reports that one's failure.
#pragma once

#include <memory>
#include <span>

#include "collectives/call_check.h"
#include "collectives/call_memory.h"
#include "collectives/revocation.h"

namespace ibcoll::collectives {

// A member of `members` (channel ranks; this rank is skipped) that `channel` holds failed, or
// null: a look at each.
const Status* failed_among(const transport::Channel& channel, std::span<const int> members);

class Operation : public CallObject {
 public:
  using State = CollectiveTask::State;

  // `check` may be null (calls not checked). `members` are the group's channel ranks; the
  // call's messages carry tags base_tag..last_tag; `collective` and `algorithm` name the call
  // in errors and reports; `revocation` (the communicator's, which outlives the call) ends it
  // once revoked.
  Operation(std::unique_ptr<CollectiveTask> task, std::unique_ptr<CallCheck> check,
            transport::Channel& channel, std::span<const int> members, uint64_t base_tag,
            uint64_t last_tag, uint64_t first_sequence, Collective collective,
            const char* algorithm, const Revocation& revocation);
  ~Operation();
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  void start();
  // Moves as far as the completed messages allow; never blocks.
  State advance();
  // Ends a running operation with `why` (a deadline passed, say).
  void abandon(const Status& why);
  // The call may return to its caller before it ends (see returned()).
  void return_early() { may_return_early_ = true; }
  // `earlier`: this communicator's previous call, which returned early; this one ends after it
  // and reports its failure (the first of this one's own and the earlier one's).
  void after(std::unique_ptr<Operation> earlier) { earlier_ = std::move(earlier); }

  State state() const { return state_; }
  // Whether its caller has the call back: ended, or allowed to return early, its task done with
  // the caller (CollectiveTask::caller_done) and no earlier call left to report. Its status
  // is then ok until it ends.
  bool returned() const {
    return state_ != State::running || (may_return_early_ && !checking_ && !earlier_ &&
                                        earlier_verdict_.ok() && task_->caller_done());
  }
  const Status& status() const { return status_; }
  // The call and what it waits for, in words: "allreduce #12 (ring) on communicator 5 of 8
  // ranks: it waits for a message from rank 3 (job rank 9) in step 1".
  std::string describe() const;

 private:
  State finish(Status status);
  // The earlier call has ended: keeps its failure for this call's report.
  void take_earlier(const Operation& earlier);
  // Now and then while running: a failed member fails the call, even one this rank does not
  // talk to directly (its partners may be waiting on it).
  const Status* failed_member();
  // A failure seen second-hand (a partner withdrew its message or gave up its call) names the
  // partner, which lives; where a member is known gone, that is the cause, named first.
  Status with_known_cause(Status status) const;

  std::unique_ptr<CollectiveTask> task_;
  std::unique_ptr<CallCheck> check_;
  transport::Channel& channel_;
  std::span<const int> members_;
  uint64_t base_tag_, last_tag_;
  uint64_t first_sequence_;  // of the communicator's first call
  Collective collective_;
  const char* algorithm_;
  const Revocation& revocation_;
  uint32_t advances_ = 0;
  bool checking_ = false;   // in the call check; the task has not started
  bool task_done_ = false;  // done while the earlier call runs on
  bool may_return_early_ = false;
  State state_ = State::running;
  Status status_;
  // On an earlier call: the check's (slots) or the earlier operation's failure, reported once
  // the task has run.
  Status earlier_verdict_;
  std::unique_ptr<Operation> earlier_;  // still running
};

}  // namespace ibcoll::collectives
