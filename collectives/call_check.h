// CallCheck: makes ranks that disagree about a collective call (which collective, count, type,
// op, root) fail together with a message saying what differs, instead of hanging or mixing
// unrelated data. It runs ahead of the algorithm and its shape depends only on the group, so
// it completes however the calls differ. Two ways, one verdict:
//  - by messages: a small allreduce gives every rank each field's minimum and maximum (the
//    checked recursive doubling with no payload, allreduce/recursive_doubling.h);
//  - by slots (every member on this node): each rank publishes its signature in its shared
//    slot and reads everyone else's (slot_exchange.h), with no message at all.
#pragma once

#include <array>
#include <memory>

#include "collectives/call_memory.h"
#include "collectives/task.h"

namespace ibcoll::collectives {

enum class Collective { allreduce, bcast };

struct CallSignature {
  Collective collective;
  uint64_t count = 0;
  DataType type = DataType::uint8;
  ReduceOp op = ReduceOp::sum;  // allreduce only (else 0)
  uint64_t root = 0;            // bcast only (else 0)
  uint64_t group = 0;           // communicator creation: a digest of the member list

  static constexpr size_t kFields = 6;
  std::array<uint64_t, kFields> fields() const {
    return {static_cast<uint64_t>(collective), count, static_cast<uint64_t>(type),
            static_cast<uint64_t>(op),         root,  group};
  }
};

// The fields of a call that every rank must pass alike. Inline: every call makes one.
inline CallSignature signature_of(Collective collective, const CollectiveArgs& args) {
  const bool reduces = collective == Collective::allreduce;
  return {collective,
          args.count,
          args.type,
          reduces ? args.op : ReduceOp::sum,
          reduces ? 0 : static_cast<uint64_t>(args.root),
          args.agreed};
}

// The failure of `call`, which this rank returned from before every rank was heard from, as a
// later report says it: "CALL, which it left without waiting for every rank, was mismatched:
// ..." (or "failed: ..."). A slot bcast's root and a small bcast's root by messages report so.
Status reported_later(const std::string& call, const Status& failure);

// ok when low == high field by field, else mismatch naming the fields and their ranges.
Status compare_calls(const std::array<uint64_t, CallSignature::kFields>& low,
                     const std::array<uint64_t, CallSignature::kFields>& high);

class CallCheck : public CallObject {
 public:
  virtual ~CallCheck() = default;
  virtual void start() = 0;
  virtual CollectiveTask::State advance() = 0;
  // Once advance() has ended: ok when every rank made the same call; mismatch naming the
  // fields that differ; or the transport's failure.
  virtual Status verdict() const = 0;
  // The call ended badly: see CollectiveTask::abandon.
  virtual void abandon(const Status& why) { (void)why; }
  // What it waits for now (CollectiveTask::waiting).
  virtual std::string waiting() const = 0;
  // A verdict on an earlier call of this rank's, which this call reports once it has run (a
  // bcast's root runs ahead: slot_exchange.h); ok if none.
  virtual Status earlier_verdict() const { return {}; }
};

// `base_tag` is the call's tag; the check uses the steps from kAlgorithmSteps up.
std::unique_ptr<CallCheck> make_message_check(const Group& group, const CallSignature& mine,
                                              uint64_t base_tag);
// Needs group.slots (and takes the call's slot sequence number).
std::unique_ptr<CallCheck> make_slot_check(const Group& group, const CallSignature& mine);

}  // namespace ibcoll::collectives
