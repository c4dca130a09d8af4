// Operation: one collective call in flight: the algorithm's task and, beside it, the call
// check. It ends when both have, with the check's verdict first (ranks that disagree all report
// the mismatch, whatever the algorithm made of it); a call that ends in failure, or is given up
// on, withdraws its posted receives so no late message lands in the caller's buffer.
#pragma once

#include <memory>

#include "collectives/call_check.h"
#include "collectives/registry.h"

namespace ibcoll::collectives {

class Operation {
 public:
  using State = CollectiveTask::State;

  // `check` may be null (calls not checked).
  Operation(const Algorithm& algorithm, std::unique_ptr<CollectiveTask> task,
            std::unique_ptr<CallCheck> check, transport::Channel& channel, uint64_t base_tag);
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
  const Algorithm& algorithm() const { return algorithm_; }

 private:
  State finish(Status status);

  const Algorithm& algorithm_;
  std::unique_ptr<CollectiveTask> task_;
  std::unique_ptr<CallCheck> check_;
  transport::Channel& channel_;
  uint64_t base_tag_;
  State task_state_ = State::running, check_state_ = State::running, state_ = State::running;
  Status status_;
};

}  // namespace ibcoll::collectives
