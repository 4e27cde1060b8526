// The deal of the split decode kernel's plan (decode_attention_plan.cuh): how the W context
// tiles ("units") of a batch are cut into the CTAs' ranges, and the inverse. Pure arithmetic,
// host and device, so that the CPU tests pin it (tests/kernels/decode_attention_deal_test.cpp).
#pragma once

#include <climits>
#include <cstdint>

#ifdef __CUDACC__
#define NANOVLLM_DEAL_HD __host__ __device__ __forceinline__
#else
#define NANOVLLM_DEAL_HD inline
#endif

namespace nanovllm::kernels::cuda::decode {

// How the W units of a batch are dealt: `quota` units per CTA, to `ctas` CTAs (0 when W = 0);
// or (parted(): quota < 0) every group of `units` tiles cut into -quota ranges at the same
// offsets, part i of group g going to CTA g * -quota + i (W and T (k + 1) < 2^31 then, so that
// the parts' arithmetic is 32-bit). The fp8 kernels keep the deal in shared memory
// (PlanSmem::deal): in registers through the kernel it added 20-128 bytes of spills to kernels at
// the 128 limit.
struct Deal {
  int64_t units, quota, ctas;
};

NANOVLLM_DEAL_HD bool parted(const Deal& d) {
  return d.quota < 0;
}

// quota = ceil(W / grid), raised to min_quota (the kernel's kMinQuota) unless some group is
// shorter than that (a range of two one-tile groups would read them one after the other). When
// every group has the same T tiles (equal lengths: a uniform batch):
// - T > quota (every group split): the groups are cut into k = min(ceil(T / quota),
//   grid / groups) equal parts if that costs at most 1/8 more tiles a CTA. No range then
//   straddles two groups: a range across a group boundary is two pieces, each paying a piece's
//   fixed cost, and two partials (one H200, 8 kv heads: batch 1 at 1025 tokens 10.6 -> 6.2 us
//   with fp8, 10.0 -> 5.7 with bf16; 8 x 32769 fp8 145.2 -> 138.2;
//   bench/results/h200-2026-11-27-issue34_decode_walk.txt).
// - Otherwise (or if that costs more) the quota is rounded up to whole groups if that costs at
//   most 1/8 more tiles a CTA: no group is then split, so none is merged. (2 kv heads at batch
//   256, 1025 tokens: T = 33 against a quota of 32 split every group into 32 + 1 tiles and ran
//   at 0.91 of copy bandwidth, against 1.00 at 1024 tokens; bench/results/h200-2026-11-27-
//   issue31_tp_rank_attention.txt.)
NANOVLLM_DEAL_HD Deal deal_units(int64_t units, int64_t grid, int min_tiles, int max_tiles,
                                 int min_quota) {
  Deal d;
  d.units = units;
  d.quota = (units + grid - 1) / grid;
  const int64_t floor_quota = min_tiles < min_quota ? min_tiles : min_quota;
  if (d.quota < floor_quota) d.quota = floor_quota;
  // 32-bit unsigned from here: every thread runs this before its first loads, so its divisions
  // are on the critical path of a small batch (a signed division costs twice the instructions).
  if (min_tiles == max_tiles && min_tiles > 0 && units < INT_MAX) {
    const unsigned t = static_cast<unsigned>(min_tiles), q = static_cast<unsigned>(d.quota);
    if (t > q) {
      const unsigned groups = static_cast<unsigned>(units) / t;
      const unsigned need = (t + q - 1) / q, fit = static_cast<unsigned>(grid) / groups;
      const unsigned k = need < fit ? need : fit;
      if (k >= 2 && int64_t{(t + k - 1) / k} * 8 <= int64_t{q} * 9 &&
          int64_t{t} * (k + 1) < INT_MAX) {
        d.ctas = int64_t{groups} * k;
        if (t % k == 0) {  // equal parts: plain ranges of t / k units already align
          d.quota = t / k;
        } else {
          d.units = t;
          d.quota = -static_cast<int64_t>(k);
        }
        return d;
      }
    }
    const unsigned whole = (q + t - 1) / t * t;
    if (int64_t{whole} * 8 <= int64_t{q} * 9) d.quota = whole;
  }
  d.ctas = units > 0 ? (units + d.quota - 1) / d.quota : 0;
  return d;
}

// First unit of CTA j's range (j <= ctas; range j ends where range j + 1 begins).
NANOVLLM_DEAL_HD int64_t range_begin(const Deal& d, int64_t j) {
  if (parted(d)) {
    const unsigned k = static_cast<unsigned>(-d.quota), t = static_cast<unsigned>(d.units),
                   jj = static_cast<unsigned>(j);
    const unsigned g = jj / k, i = jj - g * k, base = t / k;
    return static_cast<int64_t>(g * t + i * base + i * (t - base * k) / k);
  }
  const int64_t u = j * d.quota;
  return u < d.units ? u : d.units;
}

// CTA j's range [begin, end): range_begin(d, j) and range_begin(d, j + 1), sharing their
// divisions (four with parts instead of six), since the kernels' prologue waits on them.
struct Range {
  int64_t begin, end;
};
NANOVLLM_DEAL_HD Range range_of(const Deal& d, int64_t j) {
  if (parted(d)) {
    const unsigned k = static_cast<unsigned>(-d.quota), t = static_cast<unsigned>(d.units),
                   jj = static_cast<unsigned>(j);
    const unsigned g = jj / k, i = jj - g * k, base = t / k, extra = t - base * k;
    const unsigned first = g * t + i * base;
    return {static_cast<int64_t>(first + i * extra / k),
            static_cast<int64_t>(first + base + (i + 1) * extra / k)};
  }
  const int64_t u = j * d.quota, v = u + d.quota;
  return {u < d.units ? u : d.units, v < d.units ? v : d.units};
}

// The CTA whose range holds unit u. With parts, unit r of a group lies in part i, the largest
// with floor(i T / k) <= r: i = ceil((r + 1) k / T) - 1.
NANOVLLM_DEAL_HD int64_t cta_of(const Deal& d, int64_t u) {
  if (parted(d)) {
    const unsigned k = static_cast<unsigned>(-d.quota), t = static_cast<unsigned>(d.units),
                   uu = static_cast<unsigned>(u), g = uu / t, r = uu - g * t;
    return static_cast<int64_t>(g * k + ((r + 1) * k + t - 1) / t - 1);
  }
  return u / d.quota;
}

// Scratch cell of CTA j's piece that begins at unit piece_begin.
NANOVLLM_DEAL_HD int64_t partial_cell(const Deal& d, int64_t j, int64_t piece_begin) {
  return 2 * j + (piece_begin == range_begin(d, j) ? 0 : 1);
}

}  // namespace nanovllm::kernels::cuda::decode
