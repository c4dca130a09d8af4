#include "collectives/bcast/slots.h"

#include <cstring>

#include "collectives/slot_task.h"

namespace ibcoll::collectives {
namespace {

class SlotsBcast final : public SlotTask {
 public:
  SlotsBcast(Group group, CollectiveArgs args, uint64_t base_tag)
      : SlotTask(std::move(group), args, base_tag, Collective::bcast) {}

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
  return std::make_unique<SlotsBcast>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
