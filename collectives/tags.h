// Tags of collective messages: [communicator id: 16 bits][sequence number: 40][step: 8]. The
// communicator id and sequence number keep calls in flight at once apart (an early arrival
// waits under its own tag); an algorithm numbers its steps 0..127, the call check uses 128 up.
// The top 2^24 sequence numbers are the agreements' (collectives/agreement.h), whose members
// may have made different numbers of calls by then (a call failed on some before it took one):
// calls stop short of them.
#pragma once

#include <cstdint>

namespace ibcoll::collectives {

inline constexpr uint64_t kSequenceMask = (uint64_t{1} << 40) - 1;
inline constexpr uint32_t kAlgorithmSteps = 128;  // steps 0..127 belong to the algorithm
inline constexpr uint32_t kStepsPerCall = 256;

constexpr uint64_t call_tag(uint16_t communicator, uint64_t sequence) {
  return uint64_t{communicator} << 48 | (sequence & kSequenceMask) << 8;
}
inline constexpr uint64_t kAgreementSequences = uint64_t{1} << 24;
inline constexpr uint64_t kFirstAgreementSequence = kSequenceMask + 1 - kAgreementSequences;

// The tag of an agreement's message of `kind` (1 up, 2 down) in the view that holds
// `failed_count` of the `members` failed: instance after instance, the views of each take the
// next `members` sequence numbers of the agreements' (so a tag comes back only after
// kAgreementSequences / members agreements, by when the channel has forgotten that it withdrew it).
constexpr uint64_t agreement_tag(uint16_t communicator, uint32_t instance, uint32_t members,
                                 uint32_t failed_count, uint8_t kind) {
  const uint64_t offset = (uint64_t{instance} * members + failed_count) % kAgreementSequences;
  return call_tag(communicator, kFirstAgreementSequence + offset) | kind;
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
