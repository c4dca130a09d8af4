// Reduction kernels against references computed here, element by element, for every
// (type, op) pair; and the 16-bit float conversions, exhaustively where that is possible.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "collectives/datatype.h"
#include "collectives/half.h"
#include "collectives/reduce_kernels.h"

namespace ibcoll::collectives {
namespace {

constexpr size_t kCount = 1031;  // odd, so vector loops have a remainder

const DataType kAllTypes[] = {DataType::int8,     DataType::int16,   DataType::int32,
                              DataType::int64,    DataType::uint8,   DataType::uint16,
                              DataType::uint32,   DataType::uint64,  DataType::float16,
                              DataType::bfloat16, DataType::float32, DataType::float64};
const ReduceOp kAllOps[] = {ReduceOp::sum,  ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                            ReduceOp::band, ReduceOp::bor,  ReduceOp::bxor};

// Integer reference: work in 64-bit unsigned, then cut to the type's width.
template <typename T>
T int_reference(T a, T b, ReduceOp op) {
  const uint64_t x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);
  switch (op) {
    case ReduceOp::sum:
      return static_cast<T>(x + y);
    case ReduceOp::prod:
      return static_cast<T>(x * y);
    case ReduceOp::min:
      return a < b ? a : b;
    case ReduceOp::max:
      return a < b ? b : a;
    case ReduceOp::band:
      return static_cast<T>(x & y);
    case ReduceOp::bor:
      return static_cast<T>(x | y);
    case ReduceOp::bxor:
      return static_cast<T>(x ^ y);
  }
  return 0;
}

template <typename T>
void check_integers(DataType type, ReduceOp op, std::mt19937_64& rng) {
  std::vector<T> acc(kCount), in(kCount), want(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    acc[i] = static_cast<T>(rng());
    in[i] = static_cast<T>(rng());
    want[i] = int_reference(acc[i], in[i], op);
  }
  reduce(acc.data(), in.data(), kCount, type, op);
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(acc[i], want[i]) << type_name(type) << " " << op_name(op) << " at " << i;
  }
}

template <typename T>
T float_reference(T a, T b, ReduceOp op) {
  if (std::isnan(a) || std::isnan(b)) {
    return op == ReduceOp::sum || op == ReduceOp::prod ? a + b : (std::isnan(a) ? a : b);
  }
  switch (op) {
    case ReduceOp::sum:
      return a + b;
    case ReduceOp::prod:
      return a * b;
    case ReduceOp::min:
      return std::fmin(a, b);
    default:
      return std::fmax(a, b);
  }
}

bool same_value(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

template <typename T>
void check_floats(DataType type, ReduceOp op, std::mt19937_64& rng) {
  std::normal_distribution<T> value(0, 1000);
  std::vector<T> acc(kCount), in(kCount), want(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    acc[i] = value(rng);
    in[i] = i % 97 == 0 ? std::numeric_limits<T>::quiet_NaN() : value(rng);
    want[i] = float_reference(acc[i], in[i], op);
  }
  reduce(acc.data(), in.data(), kCount, type, op);
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(same_value(acc[i], want[i])) << type_name(type) << " " << op_name(op) << " at " << i
                                             << ": " << acc[i] << " vs " << want[i];
  }
}

// 16-bit floats: the reference rounds a float result with the compiler's own conversion
// (_Float16) for float16, and by truncating an exactly representable sum for bfloat16.
void check_float16(ReduceOp op, std::mt19937_64& rng) {
  std::vector<uint16_t> acc(kCount), in(kCount), want(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    acc[i] = static_cast<uint16_t>(rng());
    in[i] = static_cast<uint16_t>(rng());
    const float r = float_reference(half_to_float(acc[i]), half_to_float(in[i]), op);
    const auto h = static_cast<_Float16>(r);
    std::memcpy(&want[i], &h, 2);
  }
  reduce(acc.data(), in.data(), kCount, DataType::float16, op);
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_TRUE(acc[i] == want[i] ||
                (std::isnan(half_to_float(acc[i])) && std::isnan(half_to_float(want[i]))))
        << "float16 " << op_name(op) << " at " << i << std::hex << ": " << acc[i] << " vs "
        << want[i];
  }
}

TEST(ReduceKernels, EveryTypeAndOpMatchesTheReference) {
  std::mt19937_64 rng(12345);
  for (DataType type : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!check_reduction(type, op).ok()) continue;
      switch (type) {
        case DataType::int8:
          check_integers<int8_t>(type, op, rng);
          break;
        case DataType::int16:
          check_integers<int16_t>(type, op, rng);
          break;
        case DataType::int32:
          check_integers<int32_t>(type, op, rng);
          break;
        case DataType::int64:
          check_integers<int64_t>(type, op, rng);
          break;
        case DataType::uint8:
          check_integers<uint8_t>(type, op, rng);
          break;
        case DataType::uint16:
          check_integers<uint16_t>(type, op, rng);
          break;
        case DataType::uint32:
          check_integers<uint32_t>(type, op, rng);
          break;
        case DataType::uint64:
          check_integers<uint64_t>(type, op, rng);
          break;
        case DataType::float32:
          check_floats<float>(type, op, rng);
          break;
        case DataType::float64:
          check_floats<double>(type, op, rng);
          break;
        case DataType::float16:
          check_float16(op, rng);
          break;
        case DataType::bfloat16: {
          // Small integers are exact in bfloat16, so sums and products of them are too.
          std::vector<uint16_t> acc(kCount), in(kCount);
          for (size_t i = 0; i < kCount; ++i) {
            acc[i] = float_to_bfloat16(static_cast<float>(static_cast<int>(i % 13) - 6));
            in[i] = float_to_bfloat16(static_cast<float>(static_cast<int>(i % 7) - 3));
          }
          reduce(acc.data(), in.data(), kCount, type, op);
          for (size_t i = 0; i < kCount; ++i) {
            const float want = float_reference(static_cast<float>(static_cast<int>(i % 13) - 6),
                                               static_cast<float>(static_cast<int>(i % 7) - 3), op);
            ASSERT_EQ(bfloat16_to_float(acc[i]), want) << "bfloat16 " << op_name(op) << " " << i;
          }
          break;
        }
      }
    }
  }
}

// The one-pass form out = a (op) b gives the same bits as the accumulating one, for every
// (type, op), random bit patterns (NaNs included) and a count that leaves a vector tail.
TEST(ReduceKernels, OnePassFormMatchesTheAccumulatingOne) {
  std::mt19937_64 rng(777);
  const size_t count = kCount + 3;
  for (DataType type : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      if (!check_reduction(type, op).ok()) continue;
      const size_t bytes = count * type_size(type);
      std::vector<unsigned char> a(bytes), b(bytes), out(bytes);
      for (size_t i = 0; i < bytes; ++i) {
        a[i] = static_cast<unsigned char>(rng());
        b[i] = static_cast<unsigned char>(rng());
      }
      std::vector<unsigned char> accumulated = a;
      reduce(accumulated.data(), b.data(), count, type, op);
      reduce_into(out.data(), a.data(), b.data(), count, type, op);
      ASSERT_EQ(out, accumulated) << type_name(type) << " " << op_name(op);
    }
  }
}

TEST(ReduceKernels, IntegerArithmeticWraps) {
  int8_t a[2] = {127, -128}, b[2] = {1, -1};
  reduce(a, b, 2, DataType::int8, ReduceOp::sum);
  EXPECT_EQ(a[0], -128);
  EXPECT_EQ(a[1], 127);
  int32_t c = 1 << 30, d = 4;
  reduce(&c, &d, 1, DataType::int32, ReduceOp::prod);
  EXPECT_EQ(c, 0);
  uint16_t e = 300, f = 300;
  reduce(&e, &f, 1, DataType::uint16, ReduceOp::prod);
  EXPECT_EQ(e, static_cast<uint16_t>(90000));
}

TEST(ReduceKernels, NanWinsMinAndMaxFromEitherSide) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
    float a[2] = {nan, 1.0f}, b[2] = {1.0f, nan};
    reduce(a, b, 2, DataType::float32, op);
    EXPECT_TRUE(std::isnan(a[0]) && std::isnan(a[1])) << op_name(op);
  }
}

TEST(ReduceKernels, BitwiseOpsOnFloatsAndUnknownValuesAreRejected) {
  for (DataType type :
       {DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64}) {
    for (ReduceOp op : {ReduceOp::band, ReduceOp::bor, ReduceOp::bxor}) {
      const Status s = check_reduction(type, op);
      EXPECT_EQ(s.code(), Code::invalid_argument);
      EXPECT_EQ(s.message(),
                std::string("op: ") + op_name(op) + " is not defined for " + type_name(type));
    }
  }
  EXPECT_NE(check_reduction(static_cast<DataType>(99), ReduceOp::sum).message().find("datatype"),
            std::string::npos);
  EXPECT_NE(check_reduction(DataType::int8, static_cast<ReduceOp>(42)).message().find("op:"),
            std::string::npos);
  EXPECT_TRUE(check_reduction(DataType::uint64, ReduceOp::bxor).ok());
}

TEST(HalfPrecision, EveryFloat16RoundTripsAndMatchesTheCompiler) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = half_to_float(h);
    _Float16 reference;
    std::memcpy(&reference, &h, 2);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(reference)));
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(reference)) << std::hex << bits;
    ASSERT_EQ(float_to_half(f), h) << std::hex << bits;
  }
}

TEST(HalfPrecision, FloatToFloat16RoundsLikeTheCompiler) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    // Random bit patterns cover every exponent, including subnormal and overflowing results.
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()) & 0xc7ffffffu);
    if (std::isnan(f)) continue;
    const auto reference = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &reference, 2);
    ASSERT_EQ(float_to_half(f), want) << f;
  }
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);      // tie: stays even
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie: rounds up to even
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);             // tie past the largest: infinity
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);             // tie: zero is even
}

TEST(HalfPrecision, Bfloat16RoundsToNearestEven) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<uint16_t>(bits);
    const float f = bfloat16_to_float(b);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bfloat16(f), b) << std::hex << bits;
  }
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie: even
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie: up to even
  EXPECT_EQ(float_to_bfloat16(std::bit_cast<float>(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::nanf("")))));
}

}  // namespace
}  // namespace ibcoll::collectives
