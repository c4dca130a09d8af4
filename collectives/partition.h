// Even partitions of a vector for the algorithms that split it (ring, Rabenseifner, scatter):
// part i of n parts of `count` elements, the first `count % n` parts one element longer, so
// every rank computes the same boundaries.
#pragma once

#include <cstddef>

namespace ibcoll::collectives {

struct Span {
  size_t begin = 0, count = 0;  // in elements
  size_t end() const { return begin + count; }
};

inline Span part(size_t count, size_t parts, size_t i) {
  const size_t base = count / parts, extra = count % parts;
  return {i * base + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

}  // namespace ibcoll::collectives
