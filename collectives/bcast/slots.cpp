#include "collectives/bcast/slots.h"

#include <cstring>

#include "collectives/registry.h"
#include "collectives/slot_exchange.h"

namespace ibcoll::collectives {
namespace {

class SlotsBcast final : public CollectiveTask {
 public:
  SlotsBcast(Group group, CollectiveArgs args, uint64_t base_tag)
      : CollectiveTask(std::move(group), args, base_tag),
        exchange_(group_, signature_of(Collective::bcast, args_)) {}

  void start() override {}

  State advance() override {
    const size_t bytes = args_.count * type_size(args_.type);
    const bool root = group_.rank == args_.root;
    if (!exchange_.advance(args_.recv, root ? bytes : 0)) return State::running;
    Status verdict = exchange_.verdict();
    if (verdict.ok() && !root && bytes > 0) {
      std::memcpy(args_.recv, exchange_.data_of(args_.root), bytes);
    }
    exchange_.release();
    if (verdict.ok()) return State::done;
    fail(std::move(verdict));
    return State::failed;
  }

 private:
  SlotExchange exchange_;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_slots_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag) {
  return std::make_unique<SlotsBcast>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
