// AgreementMessage: what an agreement's tree partners send each other (collectives/agreement.h),
// and its bytes. Up: a subtree's fold of the members' values, and a decision one of them has
// already seen; down: the decision. Each carries its sender's view (the members it holds
// failed), since partners act on a message only in the same view. Read from another process,
// so parsed before it is trusted (fuzz_agreement_message): whatever parses re-encodes to the
// same bytes, and its sets fit the members.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "collectives/member_set.h"

namespace ibcoll::collectives {

// What an agreement decides: the fold of the values of the members in its view, and the members
// it holds failed. Every member that decides decides the same.
struct AgreementDecision {
  std::vector<uint64_t> values;
  MemberSet failed;
  bool operator==(const AgreementDecision&) const = default;
};

struct AgreementMessage {
  enum class Kind : uint8_t { up = 1, down = 2 };
  Kind kind = Kind::up;
  uint8_t fold = 0;       // how values fold (Agreement::Fold): members must make the same call
  uint64_t key = 0;       // the communicator's
  uint32_t instance = 0;  // the communicator's agreements, numbered from 0
  MemberSet view;
  std::vector<uint64_t> values;               // up only
  std::optional<AgreementDecision> decision;  // up: if one was seen; down: always
};

// The largest values an agreement folds: a bitmap of every communicator id (65536 bits).
inline constexpr uint32_t kMostAgreementValues = 1024;

// The bytes of a message of `members` members with `value_words` values, at most.
size_t agreement_message_bytes(int members, uint32_t value_words);
std::vector<std::byte> encode(const AgreementMessage& message);
// The message in `bytes`, or null when they are not one of an agreement of `members` members
// (its fold and value count are the sender's: the reader compares them with its own call).
std::optional<AgreementMessage> decode_agreement(std::span<const std::byte> bytes, int members);

}  // namespace ibcoll::collectives
