#include "collectives/allreduce/staged.h"

#include <algorithm>
#include <cstring>

#include "collectives/partition.h"
#include "collectives/reduce_kernels.h"
#include "collectives/slot_exchange.h"

namespace ibcoll::collectives {
namespace {

using Region = transport::shm::SlotRegion;

// With `owners` (> 0) a reduce-scatter: members below `owners` each own one contiguous slice
// of the vector (part(count, owners, m)), each chunk takes the next piece of every slice, and a
// member's output gets its own slice only; there is no gather.
class StagedAllreduce final : public CollectiveTask {
 public:
  StagedAllreduce(const Group& group, const CollectiveArgs& args, uint64_t base_tag, int owners)
      : CollectiveTask(group, args, base_tag),
        exchange_(group_, signature_of(Collective::allreduce, args_)),
        owners_(static_cast<size_t>(owners)),
        element_(type_size(args_.type)),
        slice_(Region::kStagingHalfBytes / (static_cast<size_t>(group_.size()) * element_)),
        chunk_(slice_ * static_cast<size_t>(group_.size())),
        chunks_(owners_ ? (part(args_.count, owners_, 0).count + slice_ - 1) / slice_
                        : (args_.count + chunk_ - 1) / chunk_) {}

  void start() override {}

  State advance() override {
    if (!checked_) {
      // The call's slot turn: every member has made the same call, and this call has the
      // staging halves to itself until it releases the turn at its end.
      if (!exchange_.advance(nullptr, 0)) return State::running;
      if (!exchange_.verdict().ok()) return finish(exchange_.verdict());
      checked_ = true;
      SlotGroup& slots = *group_.slots;
      first_ = slots.staged_chunks;
      slots.staged_chunks += chunks_;
    }
    while (chunk_index_ < chunks_) {
      if (!step()) return failed() ? finish(status()) : State::running;
    }
    return finish(exchange_.earlier_verdict());
  }

 private:
  enum class Phase { contribute, reduce, gather };

  Region::Staging& staging_of(int member) const { return group_.slots->slot_of(member).staging; }
  uint64_t global_chunk() const { return first_ + chunk_index_; }
  std::byte* half_of(int member) const { return staging_of(member).halves[global_chunk() % 2]; }
  // Member m's part of the current chunk, in elements of the whole vector.
  Span part_of(int member) const {
    if (owners_) {
      const auto m = static_cast<size_t>(member);
      const Span slice = m < owners_ ? part(args_.count, owners_, m) : Span{};
      const size_t done = std::min(chunk_index_ * slice_, slice.count);
      return {slice.begin + done, std::min(slice_, slice.count - done)};
    }
    const size_t begin = chunk_index_ * chunk_;
    const Span in_chunk = part(std::min(chunk_, args_.count - begin),
                               static_cast<size_t>(group_.size()), static_cast<size_t>(member));
    return {begin + in_chunk.begin, in_chunk.count};
  }
  // Where member `owner`'s part sits in any member's half.
  size_t offset_of(int owner) const { return static_cast<size_t>(owner) * slice_ * element_; }
  const std::byte* input(size_t element) const {
    return static_cast<const std::byte*>(args_.send) + element * element_;
  }
  std::byte* output(size_t element) const {
    return static_cast<std::byte*>(args_.recv) + element * element_;
  }

  // Whether every member's count `field` has reached `value`; now and then, whether the one
  // it waits on still lives.
  bool all_reached(StagingWait::Count field, uint64_t value) {
    Status trouble;
    if (wait_.reached(*group_.slots, group_.size(), field, value, trouble)) return true;
    if (!trouble.ok()) fail(std::move(trouble));
    return false;
  }

  // One step of the current chunk; false while waiting.
  bool step() {
    const int me = group_.rank;
    Region::Staging& mine = staging_of(me);
    const uint64_t g = global_chunk();
    switch (phase_) {
      case Phase::contribute: {
        // This half last held chunk g - 2: every member has finished reading it.
        if (g >= 2 && !all_reached(&Region::Staging::finished, g - 1)) return false;
        for (int m = 0; m < group_.size(); ++m) {
          if (m == me) continue;
          const Span p = part_of(m);
          std::memcpy(half_of(me) + offset_of(m), input(p.begin), p.count * element_);
        }
        Region::store(mine.contributed, g + 1);
        phase_ = Phase::reduce;
        [[fallthrough]];
      }
      case Phase::reduce: {
        if (!all_reached(&Region::Staging::contributed, g + 1)) return false;
        // Folded in member order into this rank's own place in its half (the input may be
        // the output), then copied out: every member computes its part the same way.
        const Span p = part_of(me);
        std::byte* result = half_of(me) + offset_of(me);
        fold(
            result, group_.size(),
            [&](int m) -> const void* {
              return m == me ? input(p.begin) : half_of(m) + offset_of(me);
            },
            p.count, args_.type, args_.op);
        std::memcpy(output(p.begin), result, p.count * element_);
        Region::store(mine.reduced, g + 1);
        if (owners_) return finish_chunk();  // a reduce-scatter gathers nothing
        phase_ = Phase::gather;
        [[fallthrough]];
      }
      case Phase::gather: {
        if (!all_reached(&Region::Staging::reduced, g + 1)) return false;
        for (int m = 0; m < group_.size(); ++m) {
          if (m == me) continue;
          const Span p = part_of(m);
          std::memcpy(output(p.begin), half_of(m) + offset_of(m), p.count * element_);
        }
        return finish_chunk();
      }
    }
    return true;
  }

  // Done with this chunk's halves: the members may overwrite this rank's half two chunks on.
  bool finish_chunk() {
    Region::store(staging_of(group_.rank).finished, global_chunk() + 1);
    phase_ = Phase::contribute;
    ++chunk_index_;
    return true;
  }

  void abandon(const Status& why) override { exchange_.abandon(why); }
  std::string waiting() const override {
    if (!checked_) return exchange_.waiting() + " (the call check)";
    // Contributing waits for every member to have finished reading the chunk two before.
    static const char* const kPhases[] = {"finished the chunk before", "contributed",
                                          "reduced its part of"};
    return "rank " + std::to_string(wait_.next) + " to have " + kPhases[static_cast<int>(phase_)] +
           " chunk " + std::to_string(chunk_index_ + 1) + " of " + std::to_string(chunks_) +
           " in the staging halves";
  }

  // The turn is given back when the call ran all its chunks (its status may still report an
  // earlier call's mismatch), or when the check found a mismatch (every member sees it and
  // stops there); a call that stops among its chunks gives the turn up.
  State finish(const Status& status) {
    if (!checked_ || chunk_index_ == chunks_) {
      exchange_.release();
    } else {
      exchange_.abandon(status);
    }
    if (status.ok()) return State::done;
    fail(status);
    return State::failed;
  }

  SlotExchange exchange_;
  size_t owners_;                            // a reduce-scatter's slice owners; 0: allreduce
  size_t element_, slice_, chunk_, chunks_;  // slice and chunk in elements
  bool checked_ = false;
  uint64_t first_ = 0;  // the communicator's staged chunk count when this call began
  size_t chunk_index_ = 0;
  Phase phase_ = Phase::contribute;
  StagingWait wait_;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_staged_allreduce(Group group, CollectiveArgs args,
                                                      uint64_t base_tag) {
  return std::make_unique<StagedAllreduce>(group, args, base_tag, 0);
}

std::unique_ptr<CollectiveTask> make_staged_reduce_scatter(Group group, CollectiveArgs args,
                                                           uint64_t base_tag, int owners) {
  return std::make_unique<StagedAllreduce>(group, args, base_tag, owners);
}

}  // namespace ibcoll::collectives
