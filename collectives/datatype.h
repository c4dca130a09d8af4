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

// Bytes per element; inline, as every call asks several times.
constexpr size_t type_size(DataType type) {
  switch (type) {
    case DataType::int8:
    case DataType::uint8:
      return 1;
    case DataType::int16:
    case DataType::uint16:
    case DataType::float16:
    case DataType::bfloat16:
      return 2;
    case DataType::int32:
    case DataType::uint32:
    case DataType::float32:
      return 4;
    case DataType::int64:
    case DataType::uint64:
    case DataType::float64:
      return 8;
  }
  return 0;
}
const char* type_name(DataType type);
const char* op_name(ReduceOp op);
bool is_floating(DataType type);

// ok, or invalid_argument naming the argument ("op: band is not defined for float32").
Status check_reduction(DataType type, ReduceOp op);

}  // namespace ibcoll::collectives
