// float16 (IEEE binary16) and bfloat16 stored as uint16_t, converted to and from float with
// round-to-nearest-even. Reductions on them compute in float and round once per step, so every
// rank that applies the same steps in the same order gets the same bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ibcoll::collectives {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {  // NaN: stays a quiet NaN, keeping the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // ≥ 65520 rounds to infinity
  if (magnitude < 0x38800000u) {                        // below 2^-14: subnormal or zero
    if (magnitude < 0x33000000u) return sign;           // below 2^-25: rounds to zero
    const uint32_t exponent = magnitude >> 23;
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;
    uint32_t result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (result & 1))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  const uint32_t rebased = magnitude - 0x38000000u;  // exponent bias 127 → 15
  uint32_t result = rebased >> 13;
  const uint32_t rest = rebased & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1))) ++result;  // may carry upward
  return static_cast<uint16_t>(sign | result);
}

inline float bfloat16_to_float(uint16_t b) {
  return std::bit_cast<float>(uint32_t{b} << 16);
}

inline uint16_t float_to_bfloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

}  // namespace ibcoll::collectives
