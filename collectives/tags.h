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

}  // namespace ibcoll::collectives
