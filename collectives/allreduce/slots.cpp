#include "collectives/allreduce/slots.h"

#include <cstring>

#include "collectives/reduce_kernels.h"
#include "collectives/registry.h"
#include "collectives/slot_exchange.h"

namespace ibcoll::collectives {
namespace {

class SlotsAllreduce final : public CollectiveTask {
 public:
  SlotsAllreduce(Group group, CollectiveArgs args, uint64_t base_tag)
      : CollectiveTask(std::move(group), args, base_tag),
        exchange_(group_, signature_of(Collective::allreduce, args_)) {}

  void start() override {}

  State advance() override {
    const size_t bytes = args_.count * type_size(args_.type);
    if (!exchange_.advance(args_.send, bytes)) return State::running;
    Status verdict = exchange_.verdict();
    if (verdict.ok() && bytes > 0) {
      // Every rank folds the published copies (its own too: recv may be its input) in member
      // order, so all compute the same bits.
      std::memcpy(args_.recv, exchange_.data_of(0), bytes);
      for (int m = 1; m < group_.size(); ++m)
        reduce(args_.recv, exchange_.data_of(m), args_.count, args_.type, args_.op);
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

std::unique_ptr<CollectiveTask> make_slots_allreduce(Group group, CollectiveArgs args,
                                                     uint64_t base_tag) {
  return std::make_unique<SlotsAllreduce>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
