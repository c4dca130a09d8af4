#include "collectives/schedule.h"

namespace ibcoll::collectives {

void ScheduleTask::add(int stage, const char* what, std::unique_ptr<CollectiveTask> call) {
  entries_.push_back({stage, what, std::move(call)});
}

void ScheduleTask::start_stage() {
  first_ = end_;
  while (end_ < entries_.size() && entries_[end_].stage == entries_[first_].stage)
    entries_[end_++].call->start();
}

CollectiveTask::State ScheduleTask::advance() {
  while (first_ < entries_.size()) {
    bool stage_done = true;
    for (size_t i = first_; i < end_; ++i) {
      Entry& entry = entries_[i];
      if (entry.done) continue;
      const State state = entry.call->advance();
      if (state == State::failed) {
        fail(entry.call->status());
        return State::failed;
      }
      entry.done = state == State::done;
      stage_done &= entry.done;
    }
    if (!stage_done) return State::running;
    start_stage();
  }
  return State::done;
}

void ScheduleTask::abandon(const Status& why) {
  for (Entry& entry : entries_)
    if (!entry.done) entry.call->abandon(why);
}

std::string ScheduleTask::waiting() const {
  for (size_t i = first_; i < end_; ++i) {
    if (!entries_[i].done)
      return std::string(entries_[i].what) + ": " + entries_[i].call->waiting();
  }
  return "its next stage";
}

}  // namespace ibcoll::collectives
