#include "collectives/reduce_kernels.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "collectives/half.h"

namespace ibcoll::collectives {
namespace {

template <typename T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Promote to at least unsigned int so narrow types do not multiply as signed int.
    using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

// NaN wins, so the result does not depend on which side it came from.
template <typename T>
T pick_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  }
  return b < a ? b : a;
}

template <typename T>
T pick_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  }
  return a < b ? b : a;
}

template <typename T, typename F>
void apply(void* accumulator, const void* operand, size_t count, F f) {
  T* __restrict acc = static_cast<T*>(accumulator);
  const T* __restrict in = static_cast<const T*>(operand);
  for (size_t i = 0; i < count; ++i)
    acc[i] = f(acc[i], in[i]);
}

template <typename T>
void reduce_as(void* acc, const void* in, size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return apply<T>(acc, in, count, wrap_add<T>);
    case ReduceOp::prod:
      return apply<T>(acc, in, count, wrap_mul<T>);
    case ReduceOp::min:
      return apply<T>(acc, in, count, pick_min<T>);
    case ReduceOp::max:
      return apply<T>(acc, in, count, pick_max<T>);
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::band:
        return apply<T>(acc, in, count, [](T a, T b) -> T { return a & b; });
      case ReduceOp::bor:
        return apply<T>(acc, in, count, [](T a, T b) -> T { return a | b; });
      case ReduceOp::bxor:
        return apply<T>(acc, in, count, [](T a, T b) -> T { return a ^ b; });
      default:
        break;
    }
  }
}

// 16-bit floats: widen, reduce in float, round back; one rounding per element and step.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void reduce_narrow_float(void* acc, const void* in, size_t count, ReduceOp op) {
  auto via_float = [op](uint16_t a, uint16_t b) -> uint16_t {
    const float x = Widen(a), y = Widen(b);
    switch (op) {
      case ReduceOp::sum:
        return Narrow(x + y);
      case ReduceOp::prod:
        return Narrow(x * y);
      case ReduceOp::min:
        return Narrow(pick_min(x, y));
      default:
        return Narrow(pick_max(x, y));
    }
  };
  apply<uint16_t>(acc, in, count, via_float);
}

}  // namespace

void reduce(void* accumulator, const void* operand, size_t count, DataType type, ReduceOp op) {
  switch (type) {
    case DataType::int8:
      return reduce_as<int8_t>(accumulator, operand, count, op);
    case DataType::int16:
      return reduce_as<int16_t>(accumulator, operand, count, op);
    case DataType::int32:
      return reduce_as<int32_t>(accumulator, operand, count, op);
    case DataType::int64:
      return reduce_as<int64_t>(accumulator, operand, count, op);
    case DataType::uint8:
      return reduce_as<uint8_t>(accumulator, operand, count, op);
    case DataType::uint16:
      return reduce_as<uint16_t>(accumulator, operand, count, op);
    case DataType::uint32:
      return reduce_as<uint32_t>(accumulator, operand, count, op);
    case DataType::uint64:
      return reduce_as<uint64_t>(accumulator, operand, count, op);
    case DataType::float32:
      return reduce_as<float>(accumulator, operand, count, op);
    case DataType::float64:
      return reduce_as<double>(accumulator, operand, count, op);
    case DataType::float16:
      return reduce_narrow_float<half_to_float, float_to_half>(accumulator, operand, count, op);
    case DataType::bfloat16:
      return reduce_narrow_float<bfloat16_to_float, float_to_bfloat16>(accumulator, operand, count,
                                                                       op);
  }
}

}  // namespace ibcoll::collectives
