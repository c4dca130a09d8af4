#include "collectives/check_fields.h"

#include <cstring>

namespace ibcoll::collectives {
namespace {

// Compact form: word 0 = marker | collective << 8 | type << 16 | op << 24 | root << 32, then
// count and the member-list digest. A full form's first word is the least collective (0 or 1),
// whose low byte is never the marker.
constexpr uint64_t kCompactMarker = 0xC1;
enum Field : size_t { collective, count, type, op, root, group };

}  // namespace

// One call's values as minima: each value, and its complement.
CheckFields::Minima CheckFields::minima_of(
    const std::array<uint64_t, CallSignature::kFields>& values) {
  Minima minima;
  for (size_t i = 0; i < values.size(); ++i) {
    minima[2 * i] = values[i];
    minima[2 * i + 1] = ~values[i];
  }
  return minima;
}

CheckFields::CheckFields(const CallSignature& mine) {
  const auto values = mine.fields();
  minima_ = minima_of(values);
  agreed_ = values[collective] < 256 && values[type] < 256 && values[op] < 256 &&
            values[root] <= UINT32_MAX;
  mine_ = {kCompactMarker | values[collective] << 8 | values[type] << 16 | values[op] << 24 |
               values[root] << 32,
           values[count], values[group]};
}

size_t CheckFields::write(std::byte* out) const {
  if (agreed_) {
    std::memcpy(out, mine_.data(), kCompactBytes);
    return kCompactBytes;
  }
  std::memcpy(out, minima_.data(), kFullBytes);
  return kFullBytes;
}

size_t CheckFields::fold(const std::byte* message, size_t bytes) {
  uint64_t first = 0;
  if (bytes < sizeof first) return 0;
  std::memcpy(&first, message, sizeof first);
  if ((first & 0xFF) != kCompactMarker) {
    if (bytes < kFullBytes) return 0;
    Minima theirs;
    std::memcpy(theirs.data(), message, kFullBytes);
    fold_in(theirs);
    return kFullBytes;
  }
  if (bytes < kCompactBytes) return 0;
  Packed words;
  std::memcpy(words.data(), message, kCompactBytes);
  if (agreed_ && words == mine_) return kCompactBytes;
  fold_in(minima_of({words[0] >> 8 & 0xFF, words[1], words[0] >> 16 & 0xFF, words[0] >> 24 & 0xFF,
                     words[0] >> 32, words[2]}));
  return kCompactBytes;
}

// Folds in another call's minima; the calls agree still only if they changed nothing.
void CheckFields::fold_in(const Minima& theirs) {
  for (size_t i = 0; i < minima_.size(); ++i) {
    if (theirs[i] < minima_[i]) {
      minima_[i] = theirs[i];
      agreed_ = false;
    }
  }
}

Status CheckFields::verdict(bool length_differed) const {
  Status verdict;
  if (!agreed_) {
    std::array<uint64_t, CallSignature::kFields> low{}, high{};
    for (size_t i = 0; i < low.size(); ++i) {
      low[i] = minima_[2 * i];
      high[i] = ~minima_[2 * i + 1];
    }
    verdict = compare_calls(low, high);
  }
  if (verdict.ok() && length_differed)
    return Status(Code::mismatch, "a peer's message had another length than this rank's");
  return verdict;
}

}  // namespace ibcoll::collectives
