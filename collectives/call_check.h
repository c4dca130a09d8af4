// CallCheck: makes ranks that disagree about a collective call (which collective, count, type,
// op, root) fail together with a message saying what differs, instead of hanging or mixing
// unrelated data. Each rank contributes its call's fields; a small allreduce ahead of the
// algorithm gives every rank each field's minimum and maximum, so all ranks reach the same
// verdict. Its shape depends only on the group size, so it completes however the calls differ.
#pragma once

#include <array>
#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

enum class Collective;

struct CallSignature {
  Collective collective;
  uint64_t count = 0;
  DataType type = DataType::uint8;
  ReduceOp op = ReduceOp::sum;  // allreduce only (else 0)
  uint64_t root = 0;            // bcast only (else 0)
  uint64_t group = 0;           // communicator creation: a digest of the member list
};

class CallCheck {
 public:
  // `base_tag` is the call's tag; the check uses the steps above the algorithm's.
  CallCheck(const Group& group, const CallSignature& mine, uint64_t base_tag);
  void start();
  CollectiveTask::State advance();
  // ok when every rank made the same call; mismatch naming the fields that differ; or the
  // transport's failure.
  Status verdict() const;

 private:
  static constexpr size_t kFields = 6;
  // Field i travels as value (index 2i) and ~value (2i+1): min over both gives min and max.
  std::array<uint64_t, 2 * kFields> mine_{}, agreed_{};
  std::unique_ptr<CollectiveTask> reduction_;
};

}  // namespace ibcoll::collectives
