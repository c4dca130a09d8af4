// Tags of collective messages: [communicator id: 16 bits][sequence number: 40][step: 8]. The
// communicator id and sequence number keep calls in flight at once apart (an early arrival
// waits under its own tag); an algorithm numbers its steps 0..127, the call check uses 128 up.
#pragma once

#include <cstdint>

namespace ibcoll::collectives {

inline constexpr uint64_t kSequenceMask = (uint64_t{1} << 40) - 1;
inline constexpr uint32_t kAlgorithmSteps = 128;  // steps 0..127 belong to the algorithm
inline constexpr uint32_t kStepsPerCall = 256;

constexpr uint64_t call_tag(uint16_t communicator, uint64_t sequence) {
  return uint64_t{communicator} << 48 | (sequence & kSequenceMask) << 8;
}
constexpr uint16_t communicator_of(uint64_t tag) {
  return static_cast<uint16_t>(tag >> 48);
}
constexpr uint64_t sequence_of(uint64_t tag) {
  return (tag >> 8) & kSequenceMask;
}
constexpr uint32_t step_of(uint64_t tag) {
  return static_cast<uint32_t>(tag & 0xff);
}

}  // namespace ibcoll::collectives
