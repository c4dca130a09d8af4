#include "collectives/datatype.h"

#include <string>

namespace ibcoll::collectives {

const char* type_name(DataType type) {
  static const char* const names[kDataTypeCount] = {"int8",    "int16",    "int32",   "int64",
                                                    "uint8",   "uint16",   "uint32",  "uint64",
                                                    "float16", "bfloat16", "float32", "float64"};
  const auto index = static_cast<int>(type);
  return index < kDataTypeCount ? names[index] : "unknown type";
}

const char* op_name(ReduceOp op) {
  static const char* const names[kReduceOpCount] = {"sum",  "prod", "min", "max",
                                                    "band", "bor",  "bxor"};
  const auto index = static_cast<int>(op);
  return index < kReduceOpCount ? names[index] : "unknown op";
}

bool is_floating(DataType type) {
  return type == DataType::float16 || type == DataType::bfloat16 || type == DataType::float32 ||
         type == DataType::float64;
}

Status check_reduction(DataType type, ReduceOp op) {
  if (static_cast<int>(type) >= kDataTypeCount) {
    return Status(Code::invalid_argument,
                  "datatype: unknown value " + std::to_string(static_cast<int>(type)));
  }
  if (static_cast<int>(op) >= kReduceOpCount) {
    return Status(Code::invalid_argument,
                  "op: unknown value " + std::to_string(static_cast<int>(op)));
  }
  const bool bitwise = op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
  if (bitwise && is_floating(type)) {
    return Status(Code::invalid_argument,
                  std::string("op: ") + op_name(op) + " is not defined for " + type_name(type));
  }
  return {};
}

}  // namespace ibcoll::collectives
