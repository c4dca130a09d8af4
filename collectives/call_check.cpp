#include "collectives/call_check.h"

#include <string>

#include "collectives/allreduce/recursive_doubling.h"
#include "collectives/registry.h"
#include "collectives/tags.h"

namespace ibcoll::collectives {
namespace {

const char* const kFieldNames[] = {"collective", "count", "type", "op", "root", "member list"};

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

}  // namespace

CallCheck::CallCheck(const Group& group, const CallSignature& mine, uint64_t base_tag) {
  const uint64_t fields[kFields] = {
      static_cast<uint64_t>(mine.collective), mine.count, static_cast<uint64_t>(mine.type),
      static_cast<uint64_t>(mine.op),         mine.root,  mine.group};
  for (size_t i = 0; i < kFields; ++i) {
    mine_[2 * i] = fields[i];
    mine_[2 * i + 1] = ~fields[i];
  }
  const CollectiveArgs args{mine_.data(),     agreed_.data(), mine_.size(),
                            DataType::uint64, ReduceOp::min,  0};
  reduction_ = make_recursive_doubling_allreduce(group, args, base_tag + kAlgorithmSteps);
}

void CallCheck::start() {
  reduction_->start();
}

CollectiveTask::State CallCheck::advance() {
  return reduction_->advance();
}

Status CallCheck::verdict() const {
  if (!reduction_->status().ok()) return reduction_->status();
  std::string differences;
  for (size_t i = 0; i < kFields; ++i) {
    const uint64_t low = agreed_[2 * i], high = ~agreed_[2 * i + 1];
    if (low == high) continue;
    differences += std::string(differences.empty() ? "" : ", ") + kFieldNames[i] + " (" +
                   field_value(i, low) + " vs " + field_value(i, high) + ")";
  }
  if (differences.empty()) return {};
  return Status(Code::mismatch, "ranks made different calls: they differ in " + differences);
}

}  // namespace ibcoll::collectives
