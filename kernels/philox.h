// Counter-based Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11) and the Gumbel noise the sampler derives from it. Header-only and usable from host
// and device code, so the CPU reference and the CUDA sampler compute the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define NANOVLLM_HD __host__ __device__ __forceinline__
#else
#define NANOVLLM_HD inline
#endif

namespace nanovllm {

struct PhiloxCounter {
  uint32_t x[4];
};
struct PhiloxKey {
  uint32_t k[2];
};

namespace philox_detail {
// Multipliers and Weyl key increments from the paper (Random123's defaults).
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;

NANOVLLM_HD void round(PhiloxCounter& c, const PhiloxKey& key) {
  const uint64_t p0 = uint64_t{kM0} * c.x[0];
  const uint64_t p1 = uint64_t{kM1} * c.x[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  c = PhiloxCounter{{hi1 ^ c.x[1] ^ key.k[0], lo1, hi0 ^ c.x[3] ^ key.k[1], lo0}};
}
}  // namespace philox_detail

// Ten rounds; the key is bumped between rounds (nine bumps).
NANOVLLM_HD PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  philox_detail::round(ctr, key);
  for (int i = 1; i < 10; ++i) {
    key.k[0] += philox_detail::kW0;
    key.k[1] += philox_detail::kW1;
    philox_detail::round(ctr, key);
  }
  return ctr;
}

// The sampler's stream: key = seed (lo, hi), counter = (token id, position, 0, 0).
NANOVLLM_HD uint32_t sampler_random_bits(uint64_t seed, int32_t token, int32_t position) {
  const PhiloxKey key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  const PhiloxCounter ctr{{static_cast<uint32_t>(token), static_cast<uint32_t>(position), 0u, 0u}};
  return philox4x32_10(ctr, key).x[0];
}

// u = (x + 0.5) / 2^32, exact in double, then rounded to float. Rounding can reach 1.0f for
// x >= 2^32 - 128, which would make g infinite, so u is clamped to the largest float below 1
// (the Gumbel tail is thereby cut at about 16.6, a mass of ~6e-8).
NANOVLLM_HD float uniform_from_bits(uint32_t x) {
  const float u = static_cast<float>((static_cast<double>(x) + 0.5) * 0x1p-32);
  return u < 0x1.fffffep-1f ? u : 0x1.fffffep-1f;
}

// g = -log(-log(u)) in float with logf, on host (glibc) and device (CUDA logf) alike. Both are
// within 1 ulp but not always identical, so a draw can differ between backends only when two
// candidates' scores tie to within an ulp.
NANOVLLM_HD float gumbel_from_bits(uint32_t x) {
  const float u = uniform_from_bits(x);
  return -logf(-logf(u));
}

}  // namespace nanovllm
