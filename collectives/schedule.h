// ScheduleTask: a collective made of flat calls on subgroups (collectives/node_layout.h), run in
// stages: the calls of a stage run at once, the next stage starts when all of them are done.
// The first failure fails the whole; abandoning it abandons every call not yet done, so members
// waiting in a later stage's slot turn learn of it. It owns what its calls point into.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "collectives/node_layout.h"

namespace ibcoll::collectives {

class ScheduleTask final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  // Adds `call` to `stage` (stages numbered from 0, added in order); `what` names it in
  // waiting(), e.g. "the leaders' allreduce".
  void add(int stage, const char* what, std::unique_ptr<CollectiveTask> call);
  // Keeps `group` as long as the schedule lives, for calls made on it.
  const Subgroup& keep(Subgroup group) { return kept_.emplace_back(std::move(group)); }

  void start() override { start_stage(); }
  State advance() override;
  void abandon(const Status& why) override;
  std::string waiting() const override;

 private:
  struct Entry {
    int stage;
    const char* what;
    std::unique_ptr<CollectiveTask> call;
    bool done = false;
  };
  void start_stage();

  std::deque<Subgroup> kept_;  // a deque: adding never moves what calls point into
  std::vector<Entry> entries_;
  size_t first_ = 0, end_ = 0;  // the running stage's entries
};

}  // namespace ibcoll::collectives
