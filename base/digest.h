// FNV-1a over a list of ints: ranks that pass different lists disagree on it (communicator
// creation from a list, a slot directory entry's members).
#pragma once

#include <cstdint>
#include <span>

namespace ibcoll {

inline uint64_t digest_of(std::span<const int> values) {
  uint64_t h = 1469598103934665603ull;
  for (int v : values) {
    h ^= static_cast<uint32_t>(v);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace ibcoll
