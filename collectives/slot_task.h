// SlotTask: a collective that is one SlotExchange: it publishes its contribution, and once every
// member's is visible and all made the same call, consumes them; a mismatch or a dead member
// fails it on every rank alike. The slot algorithms say only what they publish and consume.
#pragma once

#include <utility>

#include "collectives/registry.h"
#include "collectives/slot_exchange.h"

namespace ibcoll::collectives {

class SlotTask : public CollectiveTask {
 public:
  SlotTask(Group group, CollectiveArgs args, uint64_t base_tag, Collective collective)
      : CollectiveTask(std::move(group), args, base_tag),
        exchange_(group_, signature_of(collective, args_)) {}

  void start() override {}

  State advance() override {
    const auto [data, bytes] = contribution();
    if (!exchange_.advance(data, bytes)) return State::running;
    Status verdict = exchange_.verdict();
    if (verdict.ok()) consume(exchange_);
    exchange_.release();
    if (verdict.ok()) return State::done;
    fail(std::move(verdict));
    return State::failed;
  }

 protected:
  // What this rank publishes: data and its length in bytes (may be empty).
  virtual std::pair<const void*, size_t> contribution() const = 0;
  // Every member's contribution is readable through `exchange`.
  virtual void consume(const SlotExchange& exchange) = 0;
  size_t bytes() const { return args_.count * type_size(args_.type); }

 private:
  SlotExchange exchange_;
};

}  // namespace ibcoll::collectives
