// OCP FP8 E4M3 (the "fn" variant CUDA's __nv_fp8_e4m3 is): 1 sign, 4 exponent (bias 7) and 3
// mantissa bits; no infinities, 0x7f / 0xff are NaN, the largest finite value is 448 and the
// smallest subnormal 2^-9. The KV cache's fp8 format (--kv-cache-dtype fp8): each cached row
// (one token's one KV head, D values) is stored as fp8(x / 2^e) with its own exponent e (one
// i8 beside it), the least that brings the row's largest |x| to at most 448, so every row uses
// the format's range whatever its magnitude: unscaled (vLLM's default scale 1), a row whose
// values are all below 2^-6 would sit in fp8's subnormals and keep fewer than 3 significant
// bits, and one beyond 448 would saturate. A power of two keeps the division exact and the
// scale one byte (a block is (D + 1) / (2 D) of bf16's: 0.504 at D = 128). No calibration pass
// is needed. Encoding rounds to nearest even and
// saturates: a value beyond +-448 (an infinity included) becomes +-448, never inf or NaN; only
// a NaN stays NaN. Host code: the CPU backend and the references the CUDA kernels are tested
// against.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace nanovllm {

inline constexpr float kFp8E4M3Max = 448.0f;

inline uint8_t fp8_e4m3_from_float(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= kFp8E4M3Max) return sign | 0x7e;  // saturate (infinities too)
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1) (0 for a == 0)
  if (a == 0.0f || e - 1 < -6) {
    // Subnormal (or zero): a multiple of 2^-9, rounded to nearest even; 8 of them is the
    // smallest normal number, whose bits 0x08 follow on.
    const auto q = static_cast<uint8_t>(std::nearbyint(std::ldexp(a, 9)));
    return sign | q;
  }
  // Normal: a = (1 + mant / 8) * 2^exp.
  int exp = e - 1;
  int mant = static_cast<int>(std::nearbyint((2.0f * m - 1.0f) * 8.0f));
  if (mant == 8) {
    mant = 0;
    ++exp;
  }
  const int field = exp + 7;
  if (field > 15 || (field == 15 && mant == 7)) return sign | 0x7e;  // rounded past 448
  return static_cast<uint8_t>(sign | (field << 3) | mant);
}

inline float fp8_e4m3_to_float(uint8_t b) {
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  const int field = (b >> 3) & 0xf, mant = b & 0x7;
  if (field == 15 && mant == 7) return NAN;
  if (field == 0) return sign * std::ldexp(static_cast<float>(mant), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, field - 7);
}

// The row exponent: the least e with max_abs / 2^e <= 448 (0 for an all-zero or non-finite
// row), kept in [-126, 126] so that 2^e and 2^-e are both normal floats. Exact, from the
// binary exponent alone (the CUDA store computes the same with frexpf): with max_abs = m 2^x,
// m in [0.5, 1), and 448 = 0.875 2^9, max_abs <= 448 2^e holds exactly when e >= x - 9 for
// m <= 0.875, else e >= x - 8.
inline int8_t fp8_row_exponent(float max_abs) {
  if (!(max_abs > 0.0f) || !std::isfinite(max_abs)) return 0;
  int x = 0;
  const float m = std::frexp(max_abs, &x);
  const int e = m <= 0.875f ? x - 9 : x - 8;
  return static_cast<int8_t>(std::clamp(e, -126, 126));
}

// Every byte's value: the CPU attention reads the cache through it.
inline const std::array<float, 256>& fp8_e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b)
      t[static_cast<size_t>(b)] = fp8_e4m3_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

}  // namespace nanovllm
