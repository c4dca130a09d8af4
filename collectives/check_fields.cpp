#include "collectives/check_fields.h"

#include <algorithm>
#include <cstring>

namespace ibcoll::collectives {
namespace {

// Compact form: word 0 = marker | collective << 8 | type << 16 | op << 24 | root << 32, then
// count and the member-list digest. A full form's first word is the least collective (0 or 1),
// whose low byte is never the marker.
constexpr uint64_t kCompactMarker = 0xC1;
enum Field : size_t { collective, count, type, op, root, group };

}  // namespace

CheckFields::CheckFields(const CallSignature& mine) {
  const auto values = mine.fields();
  for (size_t i = 0; i < values.size(); ++i) {
    minima_[2 * i] = values[i];
    minima_[2 * i + 1] = ~values[i];
  }
}

// Every field agreed so far, and the small ones fit their bytes of word 0.
bool CheckFields::compact() const {
  for (size_t i = 0; i < CallSignature::kFields; ++i)
    if (minima_[2 * i] != ~minima_[2 * i + 1]) return false;
  return minima_[2 * collective] < 256 && minima_[2 * type] < 256 && minima_[2 * op] < 256 &&
         minima_[2 * root] <= UINT32_MAX;
}

size_t CheckFields::write(std::byte* out) const {
  if (!compact()) {
    std::memcpy(out, minima_.data(), kFullBytes);
    return kFullBytes;
  }
  const uint64_t words[3] = {kCompactMarker | minima_[2 * collective] << 8 |
                                 minima_[2 * type] << 16 | minima_[2 * op] << 24 |
                                 minima_[2 * root] << 32,
                             minima_[2 * count], minima_[2 * group]};
  std::memcpy(out, words, kCompactBytes);
  return kCompactBytes;
}

size_t CheckFields::fold(const std::byte* message, size_t bytes) {
  uint64_t first = 0;
  if (bytes < sizeof first) return 0;
  std::memcpy(&first, message, sizeof first);
  Minima theirs;
  if ((first & 0xFF) != kCompactMarker) {
    if (bytes < kFullBytes) return 0;
    std::memcpy(theirs.data(), message, kFullBytes);
    fold_into(minima_, theirs);
    return kFullBytes;
  }
  if (bytes < kCompactBytes) return 0;
  uint64_t words[3];
  std::memcpy(words, message, kCompactBytes);
  const std::array<uint64_t, CallSignature::kFields> values = {
      words[0] >> 8 & 0xFF,  words[1],       words[0] >> 16 & 0xFF,
      words[0] >> 24 & 0xFF, words[0] >> 32, words[2]};
  for (size_t i = 0; i < values.size(); ++i) {
    theirs[2 * i] = values[i];
    theirs[2 * i + 1] = ~values[i];
  }
  fold_into(minima_, theirs);
  return kCompactBytes;
}

void CheckFields::fold_into(Minima& minima, const Minima& theirs) {
  for (size_t i = 0; i < minima.size(); ++i)
    minima[i] = std::min(minima[i], theirs[i]);
}

Status CheckFields::verdict() const {
  std::array<uint64_t, CallSignature::kFields> low{}, high{};
  for (size_t i = 0; i < low.size(); ++i) {
    low[i] = minima_[2 * i];
    high[i] = ~minima_[2 * i + 1];
  }
  return compare_calls(low, high);
}

}  // namespace ibcoll::collectives
