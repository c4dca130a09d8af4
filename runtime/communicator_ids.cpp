#include "runtime/communicator_ids.h"

#include <algorithm>

#include "base/status.h"

namespace ibcoll::runtime {

CommunicatorIds::CommunicatorIds(uint32_t largest) : largest_(largest), held_(largest + 1) {
  held_[0] = held_[1] = true;
}

std::vector<uint64_t> CommunicatorIds::held_bitmap() const {
  std::vector<uint64_t> bits((largest_ + 64) / 64);
  for (uint32_t id = 0; id <= largest_; ++id)
    if (held_[id]) bits[id / 64] |= uint64_t{1} << (id % 64);
  return bits;
}

uint32_t CommunicatorIds::lowest_clear(const std::vector<uint64_t>& held_anywhere) const {
  for (uint32_t id = kFirst; id <= largest_; ++id)
    if (!(held_anywhere[id / 64] >> (id % 64) & 1)) return id;
  return 0;
}

void CommunicatorIds::see(uint64_t stamp) {
  stamp_ = std::max(stamp_, stamp + 1);
}

void CommunicatorIds::hold(uint32_t id, uint64_t stamp) {
  if (!free(id)) {
    throw Error(
        Code::invalid_argument,
        "id: " + std::to_string(id) +
            (id < kFirst || id > largest_
                 ? " is outside [" + std::to_string(kFirst) + ", " + std::to_string(largest_) + "]"
                 : " names a communicator of this process that is not freed") +
            " (pass one free on every member)");
  }
  if (const auto at = released_at_.find(id); at != released_at_.end()) {
    if (stamp < at->second) {
      throw Error(Code::invalid_argument,
                  "stamp: " + std::to_string(stamp) + " is below the sequence numbers (" +
                      std::to_string(at->second) + ") of this process's last communicator " +
                      std::to_string(id) + " (pass the members' largest stamp, taken after it)");
    }
    released_at_.erase(at);
  }
  held_[id] = true;
  highest_held_ = std::max(highest_held_, id);
  see(stamp);
}

void CommunicatorIds::release(uint32_t id, uint64_t next_sequence) {
  if (id < kFirst || id > largest_ || !held_[id]) return;
  held_[id] = false;
  while (!held_[highest_held_])
    --highest_held_;
  stamp_ = std::max(stamp_, next_sequence);
  if (next_sequence > 0) released_at_[id] = next_sequence;
}

}  // namespace ibcoll::runtime
