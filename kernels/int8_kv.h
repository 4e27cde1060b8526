// The KV cache's int8 format (--kv-cache-dtype int8): each cached row (one token's one KV
// head, D values) holds q = round(x / s), clamped to [-127, 127], with s = 2^(c / 4) and c the
// row's scale code (one i8 beside it, where the fp8 format keeps its exponent): the least c
// with 127 s >= max |x|, so the row's largest value lands on 127 within a quarter binade. Each
// q is stored in offset binary, the byte q + 128 (int8_kv_byte): why, below.
// Why not E4M3: its 3 mantissa bits move the logprobs of these models 1.6-2.2x as far as bf16
// does, a row of int8 1.1-1.4x (bench/results/h200-2026-11-27-issue34_kv_format_noise.txt);
// int8 spreads its levels evenly over the row, E4M3 spends 4 bits on a range one row never
// needs. The same bytes as fp8: (D + 1) / (2 D) of bf16's. Codes span 2^-32 .. 2^31.75: a row
// beyond 127 x 2^31.75 saturates to +-127 (an infinity too), a NaN stores 0, and a row below
// 127 x 2^-32 keeps fewer levels; never inf or NaN out. Host code: the CPU backend and the
// references the CUDA kernels are tested against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace nanovllm {

inline constexpr float kInt8KvMax = 127.0f;

// 2^(k / 4) for k = 1..3, the scale's fraction of a binade (rounded to float; scalars, so that
// device code can read them too), and all four for host code.
inline constexpr float kQuarterBinade1 = 1.18920712f, kQuarterBinade2 = 1.41421356f,
                       kQuarterBinade3 = 1.68179283f;
inline constexpr float kQuarterBinades[4] = {1.0f, kQuarterBinade1, kQuarterBinade2,
                                             kQuarterBinade3};

// 2^(code / 4), exact in float up to the rounding of kQuarterBinades.
inline float int8_kv_scale(int8_t code) {
  return std::ldexp(kQuarterBinades[code & 3], code >> 2);  // >> floors: -5 -> -2, & 3 -> 3
}

// The row's scale code from its largest |x|: the least c with 127 2^(c / 4) >= max_abs, from
// max_abs / 127 = m 2^e (m in [1, 2)) and m against kQuarterBinades, so the host and the CUDA
// store (which does the same with frexpf) agree on every row. 0 for an all-zero row, the
// largest code for a non-finite one.
inline int8_t int8_kv_scale_code(float max_abs) {
  if (!(max_abs > 0.0f)) return 0;
  if (!std::isfinite(max_abs)) return 127;
  int e = 0;
  const float m = 2.0f * std::frexp(max_abs / kInt8KvMax, &e);  // in [1, 2)
  --e;
  int k = 4;  // m > 2^(3/4): the next binade
  if (m <= 1.0f)
    k = 0;
  else if (m <= kQuarterBinades[1])
    k = 1;
  else if (m <= kQuarterBinades[2])
    k = 2;
  else if (m <= kQuarterBinades[3])
    k = 3;
  return static_cast<int8_t>(std::clamp(4 * e + k, -128, 127));
}

// One value of a row with scale s: round to nearest even, saturate to +-127; a NaN stores 0.
inline int8_t int8_kv_from_float(float x, float s) {
  if (std::isnan(x)) return 0;
  const float q = std::clamp(x / s, -kInt8KvMax, kInt8KvMax);
  return static_cast<int8_t>(std::nearbyint(q));
}

// The byte a level q is stored as: q + 128 (the sign bit flipped). Why: the decode kernels
// turn four cached bytes into f16 by two byte permutes under 0x64, which give 1024 + byte
// exactly; with the bias stored, K's 1152 comes off once per score (1152 times the query's
// sum) instead of once per value, with no xor before the permutes either (V's comes off per
// value: kernels/cuda/fp8_kv.cuh says why). The decode kernel then runs 0.5-3 % behind E4M3's
// at 2 query heads per kv head, where the signed bytes cost up to 8 %
// (bench/results/h200-2026-11-27-issue34_int8_offset_binary.txt).
inline constexpr int kInt8KvBias = 128;
// constexpr: the CUDA store and the decode kernels call them too (--expt-relaxed-constexpr).
constexpr uint8_t int8_kv_byte(int8_t q) {
  return static_cast<uint8_t>(q + kInt8KvBias);
}
constexpr int int8_kv_level(uint8_t byte) {
  return static_cast<int>(byte) - kInt8KvBias;
}

}  // namespace nanovllm
