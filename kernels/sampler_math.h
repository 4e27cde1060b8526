// The sampler's arithmetic, shared by the CPU reference and the CUDA kernels so both cut the
// same candidates (kernels/sampler.h states the rules):
//   - sampler_exp: exp(x) for x <= 0 from IEEE single operations only (rint, fma, ldexp), all
//     correctly rounded on both backends, so host and device get the same bits (expf differs
//     by an ulp between glibc and CUDA).
//   - masses in fixed point (2^-40 units): sums are exact in any order, so a sequential CPU
//     sum and a parallel GPU reduction agree to the unit.
//   - candidate keys: (l descending, id ascending) as one unsigned 64-bit order.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define NANOVLLM_SAMPLER_HD __host__ __device__ __forceinline__
#else
#define NANOVLLM_SAMPLER_HD inline
#endif

namespace nanovllm::kernels {

// exp(x) for x <= 0, within 3 ulp; 0 below -88 (and for NaN). Every step is one IEEE op.
// Not monotone to the last ulp: both backends only ever compare it per token (min-p), never
// rely on its order.
NANOVLLM_SAMPLER_HD float sampler_exp(float x) {
  if (!(x > -88.0f)) return 0.0f;
  const float n = rintf(x * 1.44269504f);     // x / ln 2, rounded to an integer
  float r = fmaf(n, -0.693145751953125f, x);  // x - n ln2 (high part, exact)
  r = fmaf(n, -1.428606765330187e-06f, r);    // (low part); |r| <= 0.35
  float p = 1.3888889e-03f;                   // 1/720: Taylor to r^6, error < 2^-23
  p = fmaf(p, r, 8.3333333e-03f);
  p = fmaf(p, r, 4.1666667e-02f);
  p = fmaf(p, r, 1.6666667e-01f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  return ldexpf(p, static_cast<int>(n));
}

// A token's top-p mass in units of 2^-40: sampler_exp(x) <= 1, so V tokens sum below 2^58.
inline constexpr int kMassFractionBits = 40;
inline constexpr float kZeroMassBelow = -28.0f;
NANOVLLM_SAMPLER_HD uint64_t sampler_mass(float x) {
  // sampler_exp(-28) ~ 6.9e-13 < 2^-40: the whole tail is 0 without evaluating it.
  if (!(x > kZeroMassBelow)) return 0;
  return static_cast<uint64_t>(ldexpf(sampler_exp(x), kMassFractionBits));
}

// The mass the top-p prefix must reach: the smallest prefix whose summed mass is >= this.
// (Past 2^53 the product rounds, identically on both backends.) top_p <= 0 or NaN: 0.
NANOVLLM_SAMPLER_HD uint64_t top_p_target(float top_p, uint64_t total) {
  if (!(top_p > 0.0f)) return 0;
  return static_cast<uint64_t>(static_cast<double>(top_p) * static_cast<double>(total));
}

// Scaled logit with -0 folded into +0 (they compare equal, so they must order equal).
NANOVLLM_SAMPLER_HD float scaled_logit(float logit, float temperature) {
  const float l = logit / temperature;
  return l == 0.0f ? 0.0f : l;
}

// Monotone map of a float onto uint32 (larger float, larger key).
NANOVLLM_SAMPLER_HD uint32_t ordered_bits(float x) {
  uint32_t u;
#ifdef __CUDA_ARCH__
  u = __float_as_uint(x);
#else
  std::memcpy(&u, &x, sizeof(u));
#endif
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
NANOVLLM_SAMPLER_HD float float_from_ordered(uint32_t k) {
  const uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
#endif
}

// One key per candidate: larger key = earlier in (l descending, id ascending). Unique per id.
NANOVLLM_SAMPLER_HD uint64_t candidate_key(float l, int32_t id) {
  return (static_cast<uint64_t>(ordered_bits(l)) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}
NANOVLLM_SAMPLER_HD float key_logit(uint64_t key) {
  return float_from_ordered(static_cast<uint32_t>(key >> 32));
}
NANOVLLM_SAMPLER_HD int32_t key_id(uint64_t key) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(key));
}

}  // namespace nanovllm::kernels
