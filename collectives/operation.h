// Operation: one collective call in flight: first the call check, then the algorithm's task.
// The algorithm starts only once every rank has been seen to make the same call, so ranks that
// disagree all fail with the check's verdict before any of the caller's data moves (and no
// message of a mismatched call can land in a buffer afterwards). A call that fails or is given
// up on withdraws its posted receives; a member the transport has declared failed fails it.
#pragma once

#include <memory>
#include <span>

#include "collectives/call_check.h"
#include "collectives/call_memory.h"

namespace ibcoll::collectives {

class Operation : public CallObject {
 public:
  using State = CollectiveTask::State;

  // `check` may be null (calls not checked). `members` are the group's channel ranks; the
  // call's messages carry tags base_tag..last_tag; `collective` and `algorithm` name the call
  // in errors and reports.
  Operation(std::unique_ptr<CollectiveTask> task, std::unique_ptr<CallCheck> check,
            transport::Channel& channel, std::span<const int> members, uint64_t base_tag,
            uint64_t last_tag, Collective collective, const char* algorithm);
  ~Operation();
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  void start();
  // Moves as far as the completed messages allow; never blocks.
  State advance();
  // Ends a running operation with `why` (a deadline passed, say).
  void abandon(const Status& why);

  State state() const { return state_; }
  const Status& status() const { return status_; }
  // The call and what it waits for, in words: "allreduce #12 (ring) on communicator 5 of 8
  // ranks: it waits for a message from rank 3 (job rank 9) in step 1".
  std::string describe() const;

 private:
  State finish(Status status);
  // Now and then while running: a failed member fails the call, even one this rank does not
  // talk to directly (its partners may be waiting on it).
  const Status* failed_member();

  std::unique_ptr<CollectiveTask> task_;
  std::unique_ptr<CallCheck> check_;
  transport::Channel& channel_;
  std::span<const int> members_;
  uint64_t base_tag_, last_tag_;
  Collective collective_;
  const char* algorithm_;
  uint32_t advances_ = 0;
  bool checking_ = false;  // in the call check; the task has not started
  State state_ = State::running;
  Status status_;
  Status earlier_verdict_;  // the check's, reported once the task has run
};

}  // namespace ibcoll::collectives
