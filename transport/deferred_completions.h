// DeferredCompletions: completions collected while a channel works and run afterwards, from
// its poll(), so no callback ever runs inside send()/recv() or while the channel is midway
// through its own state. Callbacks may post more work; run() keeps going until none is left.
#pragma once

#include <tuple>
#include <vector>

#include "transport/channel.h"

namespace ibcoll::transport {

class DeferredCompletions {
 public:
  // Room for as many as a poll usually finishes, so that a few more at once than ever before
  // do not allocate in the middle of a steady stream of calls.
  DeferredCompletions() {
    queued_.reserve(kFirstCapacity);
    running_.reserve(kFirstCapacity);
  }
  void add(Completion done, Status status, size_t bytes) {
    if (done) queued_.emplace_back(std::move(done), std::move(status), bytes);
  }
  int run() {
    int ran = 0;
    while (!queued_.empty()) {
      running_.swap(queued_);  // both keep their capacity: no allocation once warm
      for (auto& [done, status, bytes] : running_)
        done(status, bytes);
      ran += static_cast<int>(running_.size());
      running_.clear();
    }
    return ran;
  }

 private:
  static constexpr size_t kFirstCapacity = 16;
  std::vector<std::tuple<Completion, Status, size_t>> queued_, running_;
};

}  // namespace ibcoll::transport
