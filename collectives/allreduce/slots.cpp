#include "collectives/allreduce/slots.h"

#include "collectives/reduce_kernels.h"
#include "collectives/slot_task.h"

namespace ibcoll::collectives {
namespace {

class SlotsAllreduce final : public SlotTask {
 public:
  SlotsAllreduce(const Group& group, const CollectiveArgs& args, uint64_t base_tag)
      : SlotTask(group, args, base_tag, Collective::allreduce) {}

 private:
  std::pair<const void*, size_t> contribution() const override { return {args_.send, bytes()}; }
  // Every rank folds the published copies in member order, so all compute the same bits; its
  // own input it reads where it lies (its published line, which the others have just read,
  // would come back from their caches), unless that is recv.
  void consume(const SlotExchange& exchange) override {
    if (bytes() == 0) return;
    const bool in_place = args_.send == args_.recv;
    fold(
        args_.recv, group_.size(),
        [&](int m) -> const void* {
          return m == group_.rank && !in_place ? args_.send : exchange.data_of(m);
        },
        args_.count, args_.type, args_.op);
  }
};

}  // namespace

std::unique_ptr<CollectiveTask> make_slots_allreduce(Group group, CollectiveArgs args,
                                                     uint64_t base_tag) {
  return std::make_unique<SlotsAllreduce>(group, args, base_tag);
}

Status run_slots_allreduce_here(const Group& group, const CollectiveArgs& args, uint64_t base_tag,
                                WaitUntil wait) {
  return SlotsAllreduce(group, args, base_tag).run_here(wait);
}

}  // namespace ibcoll::collectives
