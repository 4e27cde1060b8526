// The sampler's arithmetic, shared by the CPU reference and the CUDA kernels so both cut the
// same candidates (kernels/sampler.h states the rules):
//   - sampler_exp: exp(x) for x <= 0 from IEEE single operations only (rint, fma, ldexp), all
//     correctly rounded on both backends, so host and device get the same bits (expf differs
//     by an ulp between glibc and CUDA).
//   - masses in fixed point (2^-40 units): sums are exact in any order, so a sequential CPU
//     sum and a parallel GPU reduction agree to the unit.
//   - candidate keys: (l descending, id ascending) as one unsigned 64-bit order.
//   - penalties: vLLM's formulas with explicit fmaf, so nvcc's contraction cannot make the
//     device round differently from the host.
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

// A slot's token state (kernels/sampler.h), one u16 per (slot, token): bit 15 = the token is
// in the prompt (set only when repetition_penalty != 1), bits 0..14 = times it was generated,
// saturating at kTokenCountMax (a frequency penalty stops growing there: 32767 repeats).
inline constexpr uint32_t kTokenInPrompt = 0x8000u;
inline constexpr uint32_t kTokenCountMax = 0x7fffu;
NANOVLLM_SAMPLER_HD uint32_t token_count(uint32_t state) {
  return state & kTokenCountMax;
}
// The state after the token is generated once more.
NANOVLLM_SAMPLER_HD uint32_t token_state_after_sample(uint32_t state) {
  return token_count(state) < kTokenCountMax ? state + 1 : state;
}

// A slot whose penalties change anything (vLLM's defaults: 1, 0, 0 = off).
NANOVLLM_SAMPLER_HD bool penalties_active(float repetition, float presence, float frequency) {
  return repetition != 1.0f || presence != 0.0f || frequency != 0.0f;
}

// vLLM's penalties on one logit x (logit_bias already added), in its order: repetition
// (transformers' rule: x / p when x > 0, else x * p) for a token in the prompt or generated,
// then frequency (count * f) and presence (p) subtracted for a generated token.
NANOVLLM_SAMPLER_HD float penalized_logit(float x, uint32_t state, float repetition, float presence,
                                          float frequency) {
  if (state != 0 && repetition != 1.0f) x = x > 0.0f ? x / repetition : x * repetition;
  const uint32_t count = token_count(state);
  if (count != 0) {
    x = fmaf(-static_cast<float>(count), frequency, x);
    x = x - presence;
  }
  return x;
}

}  // namespace nanovllm::kernels
