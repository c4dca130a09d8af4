#include "collectives/allreduce/single_copy.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/partition.h"
#include "collectives/reduce_kernels.h"
#include "collectives/scratch.h"
#include "collectives/slot_task.h"

namespace ibcoll::collectives {
namespace {

using Region = transport::shm::SlotRegion;

class SingleCopyAllreduce final : public SlotTask {
 public:
  SingleCopyAllreduce(const Group& group, const CollectiveArgs& args, uint64_t base_tag)
      : SlotTask(group, args, base_tag, Collective::allreduce),
        where_{reinterpret_cast<uint64_t>(args.send), reinterpret_cast<uint64_t>(args.recv)},
        element_(type_size(args_.type)),
        chunk_(Region::kStagingHalfBytes / element_),
        chunks_((part(args_.count, static_cast<size_t>(group_.size()), 0).count + chunk_ - 1) /
                chunk_) {}

 private:
  struct Where {
    uint64_t input, output;
  };
  enum class Phase { reduce, gather, finished };

  const char* name() const override { return "single_copy"; }
  std::string waiting() const override {
    if (phase_ == Phase::reduce) return SlotTask::waiting();  // only its slot turn waits
    return "rank " + std::to_string(wait_.next) +
           (phase_ == Phase::gather ? " to have reduced chunk " + std::to_string(gathered_ + 1) +
                                          " of " + std::to_string(chunks_) + " of its slice"
                                    : " to have finished reading this rank's buffers");
  }
  Region::Staging& staging_of(int member) const { return group_.slots->slot_of(member).staging; }
  std::pair<const void*, size_t> contribution() const override { return {&where_, sizeof(where_)}; }
  void consume(const SlotExchange&) override {
    SlotGroup& slots = *group_.slots;
    first_ = slots.staged_chunks;  // the staging counters count on from the calls before
    slots.staged_chunks += chunks_;
    // An input that is the output is overwritten by the fold while it is still an operand.
    if (args_.send == args_.recv) folded_.allocate(chunk_ * element_);
  }

  // Chunk `k` of member m's slice, in elements of the vector.
  Span chunk_of(int member, size_t k) const {
    const Span slice =
        part(args_.count, static_cast<size_t>(group_.size()), static_cast<size_t>(member));
    const size_t done = std::min(k * chunk_, slice.count);
    return {slice.begin + done, std::min(chunk_, slice.count - done)};
  }
  Where where_of(const SlotExchange& exchange, int member) const {
    Where where;
    std::memcpy(&where, exchange.data_of(member), sizeof(where));
    return where;
  }
  std::byte* output(size_t element) const {
    return static_cast<std::byte*>(args_.recv) + element * element_;
  }

  bool finish(const SlotExchange& exchange, Status& trouble) override {
    if (!exchange.verdict().ok()) return true;  // every member saw it: nobody reads anything
    switch (phase_) {
      case Phase::reduce:
        for (size_t k = 0; k < chunks_; ++k) {
          if (trouble = reduce(exchange, k); !trouble.ok()) return true;
          Region::store(staging_of(group_.rank).reduced, first_ + k + 1);
        }
        phase_ = Phase::gather;
        [[fallthrough]];
      case Phase::gather:
        if (!gather(exchange, trouble)) return false;
        if (!trouble.ok()) return true;
        Region::store(staging_of(group_.rank).finished, first_ + chunks_);
        phase_ = Phase::finished;
        [[fallthrough]];
      case Phase::finished:
        // Nobody reads this rank's buffers once every member has finished.
        return all_reached(&Region::Staging::finished, first_ + chunks_, trouble);
    }
    return true;
  }

  // This rank's chunk k from every member's input, folded in member order into its output.
  // The other members' parts are read into this rank's staging halves, in turn.
  Status reduce(const SlotExchange& exchange, size_t k) {
    const int me = group_.rank;
    const Span mine = chunk_of(me, k);
    const size_t bytes = mine.count * element_;
    Status trouble;
    const auto operand = [&](int m) -> const void* {
      if (m == me) return static_cast<const std::byte*>(args_.send) + mine.begin * element_;
      std::byte* into = staging_of(me).halves[m % 2];
      if (trouble.ok()) {
        trouble = group_.slots->read_from(m, where_of(exchange, m).input + mine.begin * element_,
                                          into, bytes, "single-copy allreduce");
      }
      return into;
    };
    std::byte* out = folded_.data() ? folded_.data() : output(mine.begin);
    fold(out, group_.size(), operand, mine.count, args_.type, args_.op);
    if (trouble.ok() && out != output(mine.begin)) std::memcpy(output(mine.begin), out, bytes);
    return trouble;
  }

  // The other members' finished slices, read from their outputs as their chunks are done;
  // false while waiting.
  bool gather(const SlotExchange& exchange, Status& trouble) {
    for (; gathered_ < chunks_; ++gathered_) {
      if (!all_reached(&Region::Staging::reduced, first_ + gathered_ + 1, trouble)) return false;
      if (!trouble.ok()) return true;
      for (int m = 0; m < group_.size(); ++m) {
        if (m == group_.rank) continue;
        const Span theirs = chunk_of(m, gathered_);
        trouble = group_.slots->read_from(m, where_of(exchange, m).output + theirs.begin * element_,
                                          output(theirs.begin), theirs.count * element_,
                                          "single-copy allreduce");
        if (!trouble.ok()) return true;
      }
    }
    return true;
  }

  // Whether every member's count `field` has reached `value` (this rank's own has, by
  // then): false while waiting, true once so or once waiting is over (`trouble` says why).
  bool all_reached(StagingWait::Count field, uint64_t value, Status& trouble) {
    return wait_.reached(*group_.slots, group_.size(), field, value, trouble) || !trouble.ok();
  }

  Where where_;
  size_t element_, chunk_, chunks_;  // chunk: of a member's slice, in elements
  Scratch folded_;                   // an in-place call's fold, before it goes to the output
  uint64_t first_ = 0;               // the communicator's staged chunk count when this began
  Phase phase_ = Phase::reduce;
  size_t gathered_ = 0;  // chunks of the others' slices read so far
  StagingWait wait_;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_single_copy_allreduce(Group group, CollectiveArgs args,
                                                           uint64_t base_tag) {
  return std::make_unique<SingleCopyAllreduce>(group, args, base_tag);
}

Status run_single_copy_allreduce_here(const Group& group, const CollectiveArgs& args,
                                      uint64_t base_tag, WaitUntil wait) {
  return SingleCopyAllreduce(group, args, base_tag).run_here(wait);
}

}  // namespace ibcoll::collectives
