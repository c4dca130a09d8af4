#include "collectives/bcast/slots.h"

#include <cstring>

#include "collectives/slot_task.h"

namespace ibcoll::collectives {
namespace {

class SlotsBcast final : public SlotTask {
 public:
  // Every rank needs the root's data alone (the root: its own, so it waits for nobody).
  SlotsBcast(const Group& group, const CollectiveArgs& args, uint64_t base_tag)
      : SlotTask(group, args, base_tag, Collective::bcast, args.root) {}

 private:
  bool root() const { return group_.rank == args_.root; }
  std::pair<const void*, size_t> contribution() const override {
    return {args_.recv, root() ? bytes() : 0};
  }
  void consume(const SlotExchange& exchange) override {
    if (!root() && bytes() > 0) std::memcpy(args_.recv, exchange.data_of(args_.root), bytes());
  }
};

}  // namespace

std::unique_ptr<CollectiveTask> make_slots_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag) {
  return std::make_unique<SlotsBcast>(group, args, base_tag);
}

Status run_slots_bcast_here(const Group& group, const CollectiveArgs& args, uint64_t base_tag,
                            WaitUntil wait) {
  return SlotsBcast(group, args, base_tag).run_here(wait);
}

}  // namespace ibcoll::collectives
