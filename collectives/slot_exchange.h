// SlotExchange: one call's turn in the slot region. Once every member has read what this rank
// put in the same buffer three calls ago (seen by its having published the call before last),
// it writes its call signature (and data, if any) and publishes them with the call's sequence
// number; then it waits for every member's. Each step
// is tried once per advance(), so it never blocks. Afterwards every member's data can be read
// until release(), and every member has seen every signature, so all reach the same verdict.
#pragma once

#include <cstddef>

#include "collectives/call_check.h"

namespace ibcoll::collectives {

class SlotExchange {
 public:
  SlotExchange(const Group& group, const CallSignature& mine);
  // Publishes `bytes` (≤ SlotRegion::kDataBytes) of `data` once the buffer is free, then looks
  // for the others'. True once every member's contribution to this call is visible, or a
  // member it waits on has died (the verdict says which).
  bool advance(const void* data, size_t bytes);
  Status verdict() const;
  const std::byte* data_of(int member) const;
  // This rank has finished reading the call's buffers.
  void release();

 private:
  using Region = transport::shm::SlotRegion;
  Region::Buffer& buffer_of(int member, uint64_t sequence) const;
  Region::Buffer& buffer_of(int member) const { return buffer_of(member, sequence_); }
  // A fruitless look at `member`: now and then, make sure it is still alive. True once dead.
  bool gone(int member);
  // Fruitless advances between two such checks (a check reads /proc).
  static constexpr uint32_t kPollsPerLivenessCheck = 4096;

  SlotGroup& slots_;
  int rank_, size_;
  uint64_t sequence_;
  std::array<uint64_t, Region::kSignatureWords> signature_;
  bool published_ = false;
  int next_member_ = 0;  // the next member whose contribution has not been seen
  uint32_t idle_ = 0;
  Status failure_;
};

}  // namespace ibcoll::collectives
