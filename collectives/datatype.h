// Element types and reduction operations of ibcoll's collectives, with their sizes and names,
// and the rule for which operations a type supports (bitwise ones only on integers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"

namespace ibcoll::collectives {

enum class DataType : uint8_t {
  int8,
  int16,
  int32,
  int64,
  uint8,
  uint16,
  uint32,
  uint64,
  float16,
  bfloat16,
  float32,
  float64,
};
inline constexpr int kDataTypeCount = 12;

enum class ReduceOp : uint8_t { sum, prod, min, max, band, bor, bxor };
inline constexpr int kReduceOpCount = 7;

size_t type_size(DataType type);
const char* type_name(DataType type);
const char* op_name(ReduceOp op);
bool is_floating(DataType type);

// ok, or invalid_argument naming the argument ("op: band is not defined for float32").
Status check_reduction(DataType type, ReduceOp op);

}  // namespace ibcoll::collectives
