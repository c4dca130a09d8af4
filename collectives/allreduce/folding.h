// What the power-of-two allreduces (recursive doubling, Rabenseifner) share. A group of n
// members runs on its largest power of two, pof2: the first 2·(n - pof2) members pair up, the
// even one of each pair hands its vector to the odd one (which combines them) and waits for the
// result, so no member works in a linear fallback. And combine(): lower member's data first,
// so both members of an exchange compute the same bits.
#pragma once

#include <cstddef>
#include <cstring>

#include "collectives/reduce_kernels.h"

namespace ibcoll::collectives {

struct Folding {
  explicit Folding(int members) {
    while (pof2 * 2 <= members)
      pof2 *= 2;
    extra = members - pof2;
  }
  bool paired(int member) const { return member < 2 * extra; }
  // An even member of a pair sits out the power-of-two phase.
  bool sits_out(int member) const { return paired(member) && member % 2 == 0; }
  int virtual_rank(int member) const { return paired(member) ? member / 2 : member - extra; }
  int member_of(int virtual_rank) const {
    return virtual_rank < extra ? virtual_rank * 2 + 1 : virtual_rank + extra;
  }

  int pof2 = 1, extra = 0;
};

// mine = lower (op) higher, where `incoming` is the other member's data: the same bits on both
// sides of an exchange. `incoming` is clobbered.
inline void combine(std::byte* mine, std::byte* incoming, size_t count, DataType type, ReduceOp op,
                    bool incoming_is_lower) {
  if (count == 0) return;
  if (incoming_is_lower) {
    reduce(incoming, mine, count, type, op);
    std::memcpy(mine, incoming, count * type_size(type));
  } else {
    reduce(mine, incoming, count, type, op);
  }
}

}  // namespace ibcoll::collectives
