#include "collectives/reduce_kernels.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// Buffers need not be aligned to their element type (MPI takes any address): elements of one
// that is not are read and written through memcpy, which is defined at any address.
template <typename T>
bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(T) == 0;
}
template <typename T>
T load(const void* base, size_t i) {
  T value;
  std::memcpy(&value, static_cast<const std::byte*>(base) + i * sizeof(T), sizeof(T));
  return value;
}
template <typename T>
void store(void* base, size_t i, T value) {
  std::memcpy(static_cast<std::byte*>(base) + i * sizeof(T), &value, sizeof(T));
}

// accumulator[i] = f(accumulator[i], operand[i]).
template <typename T, typename F>
void apply(void* accumulator, const void* operand, size_t count, F f) {
  if (!aligned<T>(accumulator) || !aligned<T>(operand)) {
    for (size_t i = 0; i < count; ++i)
      store<T>(accumulator, i, f(load<T>(accumulator, i), load<T>(operand, i)));
    return;
  }
  T* __restrict acc = static_cast<T*>(accumulator);
  const T* __restrict in = static_cast<const T*>(operand);
  for (size_t i = 0; i < count; ++i)
    acc[i] = f(acc[i], in[i]);
}

// out[i] = f(a[i], b[i]), out apart from both.
template <typename T, typename F>
void apply(void* out, const void* a, const void* b, size_t count, F f) {
  if (!aligned<T>(out) || !aligned<T>(a) || !aligned<T>(b)) {
    for (size_t i = 0; i < count; ++i)
      store<T>(out, i, f(load<T>(a, i), load<T>(b, i)));
    return;
  }
  T* __restrict result = static_cast<T*>(out);
  const T* __restrict x = static_cast<const T*>(a);
  const T* __restrict y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i)
    result[i] = f(x[i], y[i]);
}

// Calls kernel.template operator()<T>(f) with the element function f of `op` on T.
template <typename T, typename Kernel>
void with_op(ReduceOp op, Kernel& kernel) {
  switch (op) {
    case ReduceOp::sum:
      return kernel.template operator()<T>(wrap_add<T>);
    case ReduceOp::prod:
      return kernel.template operator()<T>(wrap_mul<T>);
    case ReduceOp::min:
      return kernel.template operator()<T>(pick_min<T>);
    case ReduceOp::max:
      return kernel.template operator()<T>(pick_max<T>);
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::band:
        return kernel.template operator()<T>([](T a, T b) -> T { return a & b; });
      case ReduceOp::bor:
        return kernel.template operator()<T>([](T a, T b) -> T { return a | b; });
      case ReduceOp::bxor:
        return kernel.template operator()<T>([](T a, T b) -> T { return a ^ b; });
      default:
        break;
    }
  }
}

// 16-bit floats: widen, reduce in float, round back; one rounding per element and step.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float), typename Kernel>
void with_narrow_float_op(ReduceOp op, Kernel& kernel) {
  kernel.template operator()<uint16_t>([op](uint16_t a, uint16_t b) -> uint16_t {
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
  });
}

// The element type and function of (type, op), handed to `kernel`.
template <typename Kernel>
void dispatch(DataType type, ReduceOp op, Kernel kernel) {
  switch (type) {
    case DataType::int8:
      return with_op<int8_t>(op, kernel);
    case DataType::int16:
      return with_op<int16_t>(op, kernel);
    case DataType::int32:
      return with_op<int32_t>(op, kernel);
    case DataType::int64:
      return with_op<int64_t>(op, kernel);
    case DataType::uint8:
      return with_op<uint8_t>(op, kernel);
    case DataType::uint16:
      return with_op<uint16_t>(op, kernel);
    case DataType::uint32:
      return with_op<uint32_t>(op, kernel);
    case DataType::uint64:
      return with_op<uint64_t>(op, kernel);
    case DataType::float32:
      return with_op<float>(op, kernel);
    case DataType::float64:
      return with_op<double>(op, kernel);
    case DataType::float16:
      return with_narrow_float_op<half_to_float, float_to_half>(op, kernel);
    case DataType::bfloat16:
      return with_narrow_float_op<bfloat16_to_float, float_to_bfloat16>(op, kernel);
  }
}

}  // namespace

void reduce(void* accumulator, const void* operand, size_t count, DataType type, ReduceOp op) {
  dispatch(type, op, [&]<typename T>(auto f) { apply<T>(accumulator, operand, count, f); });
}

void reduce_into(void* out, const void* a, const void* b, size_t count, DataType type,
                 ReduceOp op) {
  dispatch(type, op, [&]<typename T>(auto f) { apply<T>(out, a, b, count, f); });
}

void fold(void* out, int n, FunctionRef<const void*(int)> operand, size_t count, DataType type,
          ReduceOp op) {
  if (n == 1) {
    std::memcpy(out, operand(0), count * type_size(type));
    return;
  }
  reduce_into(out, operand(0), operand(1), count, type, op);  // one pass for the first pair
  for (int i = 2; i < n; ++i)
    reduce(out, operand(i), count, type, op);
}

}  // namespace ibcoll::collectives
