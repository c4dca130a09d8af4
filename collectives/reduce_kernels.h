// Reduction kernels: accumulator[i] = accumulator[i] (op) operand[i], or out[i] = a[i] (op) b[i],
// for every (type, op) that check_reduction() allows. Plain loops over restrict pointers, which
// the compiler vectorizes.
// Integer sums and products wrap (two's complement) rather than overflow; float min/max
// propagate NaN; float16/bfloat16 compute in float and round to nearest even each step.
#pragma once

#include <cstddef>

#include "base/function_ref.h"
#include "collectives/datatype.h"

namespace ibcoll::collectives {

// The caller has checked the pair with check_reduction(); buffers may not overlap unless
// they are the same buffer.
void reduce(void* accumulator, const void* operand, size_t count, DataType type, ReduceOp op);
// out[i] = a[i] (op) b[i] in one pass; `out` overlaps neither.
void reduce_into(void* out, const void* a, const void* b, size_t count, DataType type, ReduceOp op);
// out = operand(0) (op) operand(1) (op) ... (op) operand(n - 1), folded in that order (so every
// rank that folds the same operands gets the same bits); `out` overlaps no operand. n ≥ 1.
void fold(void* out, int n, FunctionRef<const void*(int)> operand, size_t count, DataType type,
          ReduceOp op);

}  // namespace ibcoll::collectives
