#include "collectives/call_check.h"

#include <string>

#include "collectives/allreduce/recursive_doubling.h"
#include "collectives/registry.h"
#include "collectives/slot_exchange.h"

namespace ibcoll::collectives {
namespace {

// The last: the digest callers agree on (a new communicator's member list), to which a fully
// checked call adds that of the light bcasts before it (bcast/light.h).
const char* const kFieldNames[] = {
    "collective", "count", "type", "op", "root", "digest (member list, earlier small bcasts)"};

std::string field_value(size_t field, uint64_t value) {
  switch (field) {
    case 0:
      return collective_name(static_cast<Collective>(value));
    case 2:
      return type_name(static_cast<DataType>(value));
    case 3:
      return op_name(static_cast<ReduceOp>(value));
    case 5:
      return "digest " + std::to_string(value);
    default:
      return std::to_string(value);
  }
}

// The checked recursive-doubling allreduce with nothing to reduce: the fields alone.
class MessageCheck final : public CallCheck {
 public:
  MessageCheck(const Group& group, const CallSignature& mine, uint64_t base_tag)
      : exchange_(make_checked_recursive_doubling_allreduce(group, {}, base_tag, mine)) {}
  void start() override { exchange_->start(); }
  CollectiveTask::State advance() override { return exchange_->advance(); }
  Status verdict() const override { return exchange_->status(); }
  std::string waiting() const override { return exchange_->waiting(); }

 private:
  std::unique_ptr<CollectiveTask> exchange_;
};

class SlotCheck final : public CallCheck {
 public:
  SlotCheck(const Group& group, const CallSignature& mine) : exchange_(group, mine) {}
  void start() override {}
  CollectiveTask::State advance() override {
    if (!exchange_.advance(nullptr, 0)) return CollectiveTask::State::running;
    verdict_ = exchange_.verdict();
    exchange_.release();  // nothing to read but the signatures
    return verdict_.ok() ? CollectiveTask::State::done : CollectiveTask::State::failed;
  }
  Status verdict() const override { return verdict_; }
  Status earlier_verdict() const override { return exchange_.earlier_verdict(); }
  void abandon(const Status& why) override { exchange_.abandon(why); }
  std::string waiting() const override { return exchange_.waiting(); }

 private:
  SlotExchange exchange_;
  Status verdict_;
};

}  // namespace

Status reported_later(const std::string& call, const Status& failure) {
  return Status(failure.code(),
                call + ", which it left without waiting for every rank, " +
                    (failure.code() == Code::mismatch ? "was mismatched: " : "failed: ") +
                    failure.message());
}

Status compare_calls(const std::array<uint64_t, CallSignature::kFields>& low,
                     const std::array<uint64_t, CallSignature::kFields>& high) {
  std::string differences;
  for (size_t i = 0; i < low.size(); ++i) {
    if (low[i] == high[i]) continue;
    differences += std::string(differences.empty() ? "" : ", ") + kFieldNames[i] + " (" +
                   field_value(i, low[i]) + " vs " + field_value(i, high[i]) + ")";
  }
  if (differences.empty()) return {};
  return Status(Code::mismatch, "ranks made different calls: they differ in " + differences);
}

std::unique_ptr<CallCheck> make_message_check(const Group& group, const CallSignature& mine,
                                              uint64_t base_tag) {
  return std::make_unique<MessageCheck>(group, mine, base_tag);
}

std::unique_ptr<CallCheck> make_slot_check(const Group& group, const CallSignature& mine) {
  return std::make_unique<SlotCheck>(group, mine);
}

}  // namespace ibcoll::collectives
