// SlotTask: a collective that is one SlotExchange: it publishes its contribution, and once every
// member's is visible and all made the same call, consumes them; a mismatch or a dead member
// fails it on every rank (one that needs a single member's data may learn of it at its next
// call: slot_exchange.h). The slot algorithms say only what they publish and consume.
#pragma once

#include <utility>

#include "collectives/registry.h"
#include "collectives/slot_exchange.h"

namespace ibcoll::collectives {

class SlotTask : public CollectiveTask {
 public:
  // `source`: the one member whose contribution this rank needs, if only one (SlotExchange).
  SlotTask(const Group& group, const CollectiveArgs& args, uint64_t base_tag, Collective collective,
           int source = SlotExchange::kEveryMember)
      : CollectiveTask(group, args, base_tag),
        collective_(collective),
        exchange_(group_, signature_of(collective, args_), source) {}

  void start() override {}
  void abandon(const Status& why) override { exchange_.abandon(why); }
  std::string waiting() const override { return exchange_.waiting(); }

  State advance() override {
    if (!exchanged_) {
      const auto [data, bytes] =
          exchange_.published() ? std::pair<const void*, size_t>() : contribution();
      if (!exchange_.advance(data, bytes)) return State::running;
      if (exchange_.verdict().ok()) consume(exchange_);
      exchanged_ = true;
    }
    Status trouble;
    if (!finish(exchange_, trouble)) return State::running;
    // A member that gave up or died loses the communicator its turns; a mismatch does not.
    if (!trouble.ok() && trouble.code() != Code::mismatch) exchange_.abandon(trouble);
    exchange_.release();
    const Status& verdict = !trouble.ok()              ? trouble
                            : exchange_.verdict().ok() ? exchange_.earlier_verdict()
                                                       : exchange_.verdict();
    if (verdict.ok()) return State::done;
    fail(verdict);
    return State::failed;
  }

  // Runs the call to its end, looking at the slots several times per round of `wait`'s
  // progress (a look costs a few loads; a round polls every transport).
  Status run_here(WaitUntil wait) {
    constexpr int kLooksPerRound = 16;
    State state = State::running;
    try {
      wait(
          [&] {
            for (int look = 0; look < kLooksPerRound && state == State::running; ++look)
              state = advance();
            return state != State::running;
          },
          [&] {
            return describe_call(collective_, name(), base_tag_, group_.size(),
                                 group_.first_sequence) +
                   ": it waits for " + waiting();
          });
    } catch (const Error& e) {
      exchange_.abandon(e.status());
      return e.status();
    }
    return status();
  }

 protected:
  // What this rank publishes: data and its length in bytes (may be empty).
  virtual std::pair<const void*, size_t> contribution() const = 0;
  // Every member's contribution is readable through `exchange`.
  virtual void consume(const SlotExchange& exchange) = 0;
  // After the exchange (consumed or not): true once the call may end; `trouble` set if it
  // failed here. For calls whose members read each other's memory, which must wait for that.
  virtual bool finish(const SlotExchange& /*exchange*/, Status& /*trouble*/) { return true; }
  size_t bytes() const { return args_.count * type_size(args_.type); }
  // The algorithm's name, for what a blocked call waits for.
  virtual const char* name() const { return "slots"; }

 private:
  Collective collective_;
  SlotExchange exchange_;
  bool exchanged_ = false;
};

}  // namespace ibcoll::collectives
