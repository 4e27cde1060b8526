// Host-side bfloat16 <-> float conversion (round to nearest even, NaN kept quiet).
// bf16 is stored as uint16_t on the host: the top half of an IEEE float.
#pragma once

#include <bit>
#include <cstdint>

namespace nanovllm {

inline float bf16_to_float(uint16_t h) {
  return std::bit_cast<float>(uint32_t{h} << 16);
}

inline uint16_t float_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE half -> float, for F16 checkpoints.
inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    if (man == 0) return std::bit_cast<float>(sign);
    // subnormal: renormalise
    exp = 127 - 15 + 1;
    while ((man & 0x400u) == 0) {
      man <<= 1;
      --exp;
    }
    man &= 0x3ffu;
    return std::bit_cast<float>(sign | (exp << 23) | (man << 13));
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

}  // namespace nanovllm
