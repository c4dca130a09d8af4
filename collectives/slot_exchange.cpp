#include "collectives/slot_exchange.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ibcoll::collectives {
namespace {

using Region = transport::shm::SlotRegion;
static_assert(Region::kSignatureWords == 4, "the packing below fills four words");

// Six fields in four words: collective, type and op are small.
std::array<uint64_t, Region::kSignatureWords> pack(const CallSignature& s) {
  const auto f = s.fields();
  return {f[0] | f[2] << 8 | f[3] << 16, f[1], f[4], f[5]};
}

std::array<uint64_t, CallSignature::kFields> unpack(const uint64_t* w) {
  return {w[0] & 0xff, w[1], (w[0] >> 8) & 0xff, (w[0] >> 16) & 0xff, w[2], w[3]};
}

}  // namespace

SlotExchange::SlotExchange(const Group& group, const CallSignature& mine)
    : slots_(*group.slots),
      rank_(group.rank),
      size_(group.size()),
      sequence_(group.slot_sequence),
      signature_(pack(mine)) {}

Region::Buffer& SlotExchange::buffer_of(int member, uint64_t sequence) const {
  return slots_.region->slot(slots_.index, slots_.local_ranks[static_cast<size_t>(member)])
      .buffers[sequence % Region::kBuffers];
}

bool SlotExchange::gone(int member) {
  if (++idle_ % kPollsPerLivenessCheck != 0) return false;
  const int local = slots_.local_ranks[static_cast<size_t>(member)];
  if (slots_.region->alive(local)) return false;
  failure_ =
      Status(Code::peer_failed, "rank " + std::to_string(member) + " of the communicator (pid " +
                                    std::to_string(slots_.region->pid(local)) + ") has exited");
  return true;
}

bool SlotExchange::advance(const void* data, size_t bytes) {
  if (!failure_.ok()) return true;
  if (!published_) {
    // Calls in flight at once take their turns in order: publishing a call says that every
    // earlier call's buffers have been read.
    if (slots_.released + 1 != sequence_) return false;
    // Our buffer last held call sequence - 3: each member has read it once it has published
    // call sequence - 2.
    for (size_t m = 0; m < static_cast<size_t>(size_); ++m) {
      uint64_t& seen = slots_.seen_ready[m];
      if (static_cast<int>(m) == rank_ || seen + 2 >= sequence_) continue;
      seen = Region::load(buffer_of(static_cast<int>(m), sequence_ - 2).ready);
      if (seen + 2 < sequence_) return gone(static_cast<int>(m));
    }
    Region::Buffer& mine = buffer_of(rank_);
    if (bytes > 0) std::memcpy(mine.data, data, bytes);
    std::memcpy(mine.signature, signature_.data(), sizeof(mine.signature));
    Region::store(mine.ready, sequence_);
    published_ = true;
  }
  for (; next_member_ < size_; ++next_member_) {
    if (Region::load(buffer_of(next_member_).ready) < sequence_) return gone(next_member_);
  }
  return true;
}

Status SlotExchange::verdict() const {
  if (!failure_.ok()) return failure_;
  bool same = true;
  for (int m = 0; m < size_ && same; ++m)
    same = std::memcmp(buffer_of(m).signature, signature_.data(), sizeof(signature_)) == 0;
  if (same) return {};
  auto low = unpack(signature_.data()), high = low;
  for (int m = 0; m < size_; ++m) {
    const auto theirs = unpack(buffer_of(m).signature);
    for (size_t i = 0; i < theirs.size(); ++i) {
      low[i] = std::min(low[i], theirs[i]);
      high[i] = std::max(high[i], theirs[i]);
    }
  }
  return compare_calls(low, high);
}

const std::byte* SlotExchange::data_of(int member) const {
  return buffer_of(member).data;
}

void SlotExchange::release() {
  slots_.released = sequence_;
}

}  // namespace ibcoll::collectives
