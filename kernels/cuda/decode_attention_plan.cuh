// The split-KV partition of a decode batch, computed on the device by every CTA from
// context_lens alone: nothing depends on host-side lengths, so a CUDA graph captured once stays
// right, and balanced, for whatever lengths a replay brings.
//
// Work units are context tiles in (sequence b, kv head hk, tile t) order: sequence b with
// T_b = ceil(ctx_b / kTokens) tiles owns Hkv * T_b consecutive units, and kv head hk of it
// (a "group") the T_b units from the sequence's first unit + hk * T_b. The W units of the
// batch are cut into ranges of Q = max(kMinQuota, ceil(W / gridDim.x)) units, CTA j taking
// [j Q, min((j + 1) Q, W)), so P = ceil(W / Q) <= gridDim.x CTAs work: every CTA reads the same
// number of tiles whatever the mix of lengths, so no long sequence leaves a tail of late CTAs
// and no CTA idles while another has work (split-KV in the stream-K manner rather than a fixed
// split count). Equal lengths get ranges aligned with the groups: whole groups, or every
// group cut at the same offsets (deal_units).
//
// The part of a range inside one group is a piece. A piece that is the whole group writes the
// output; the others are at most the first and the last piece of a range, and write a partial
// into scratch cell 2j (the piece that starts the range) or 2j + 1 (the piece that ends it).
// A split group is covered by consecutive CTAs j0 .. j1, j0 = cta_of(first unit); j0 is
// unique to it (a group that goes on past a range is that range's last piece), so it also
// names the group's merge counter.
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/cuda/decode_attention_tile.cuh"

namespace nanovllm::kernels::cuda::decode {

// Tiles a CTA loads at once when it starts (kStages - 1): ranges shorter than that inside one
// group cost no less time, they only add partials to merge.
constexpr int kMinQuota = kStages - 1;

// How the W units of a batch are dealt: `quota` units per CTA, to `ctas` CTAs (0 when W = 0);
// or (parted(): quota < 0) every group of `units` tiles cut into -quota ranges at the same
// offsets, part i of group g going to CTA g * -quota + i (W and T (k + 1) < 2^31 then, so that
// the parts' arithmetic is 32-bit). The fp8 kernels keep the deal in shared memory
// (PlanSmem::deal): in registers through the kernel it added 20-128 bytes of spills to kernels at
// the 128 limit.
struct Deal {
  int64_t units, quota, ctas;
};

__device__ __forceinline__ bool parted(const Deal& d) {
  return d.quota < 0;
}

// quota = ceil(W / grid), raised to kMinQuota unless some group is shorter than that (a range
// of two one-tile groups would read them one after the other). When every group has the same
// T tiles (equal lengths: a uniform batch):
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
__device__ __forceinline__ Deal deal_units(int64_t units, int64_t grid, int min_tiles,
                                           int max_tiles) {
  Deal d;
  d.units = units;
  d.quota = (units + grid - 1) / grid;
  const int64_t floor_quota = min_tiles < kMinQuota ? min_tiles : kMinQuota;
  if (d.quota < floor_quota) d.quota = floor_quota;
  // 32-bit from here: every thread runs this before its first loads, so its divisions are on
  // the critical path of a small batch.
  if (min_tiles == max_tiles && min_tiles > 0 && units < INT_MAX) {
    const int t = min_tiles, q = static_cast<int>(d.quota);
    if (t > q) {
      const int groups = static_cast<int>(units) / t;
      const int need = (t + q - 1) / q, fit = static_cast<int>(grid) / groups;
      const int k = need < fit ? need : fit;
      if (k >= 2 && (t + k - 1) / k * 8 <= q * 9 && int64_t{t} * (k + 1) < INT_MAX) {
        d.ctas = int64_t{groups} * k;
        if (t % k == 0) {  // equal parts: plain ranges of t / k units already align
          d.quota = t / k;
        } else {
          d.units = t;
          d.quota = -k;
        }
        return d;
      }
    }
    const int whole = (q + t - 1) / t * t;
    if (int64_t{whole} * 8 <= int64_t{q} * 9) d.quota = whole;
  }
  d.ctas = units > 0 ? (units + d.quota - 1) / d.quota : 0;
  return d;
}

// First unit of CTA j's range (j <= ctas; range j ends where range j + 1 begins).
__device__ __forceinline__ int64_t range_begin(const Deal& d, int64_t j) {
  if (parted(d)) {
    const int k = static_cast<int>(-d.quota), t = static_cast<int>(d.units),
              jj = static_cast<int>(j);
    return jj / k * t + jj % k * (t / k) + jj % k * (t % k) / k;
  }
  const int64_t u = j * d.quota;
  return u < d.units ? u : d.units;
}

// The CTA whose range holds unit u. With parts, unit r of a group lies in part i, the largest
// with floor(i T / k) <= r: i = ceil((r + 1) k / T) - 1.
__device__ __forceinline__ int64_t cta_of(const Deal& d, int64_t u) {
  if (parted(d)) {
    const int k = static_cast<int>(-d.quota), t = static_cast<int>(d.units),
              uu = static_cast<int>(u), r = uu % t;
    return uu / t * k + ((r + 1) * k + t - 1) / t - 1;
  }
  return u / d.quota;
}

// Scratch cell of CTA j's piece that begins at unit piece_begin.
__device__ __forceinline__ int64_t partial_cell(const Deal& d, int64_t j, int64_t piece_begin) {
  return 2 * j + (piece_begin == range_begin(d, j) ? 0 : 1);
}

// Shared memory of the plan: the per-warp results of the scan, then where a unit lies.
struct alignas(16) PlanSmem {
  int64_t warp_units[kWarps];
  int warp_min_tiles[kWarps];
  int warp_max_tiles[kWarps];
  int64_t seq_first_unit;  // first unit of sequence `seq`
  int seq, seq_ctx;        // ... and its context length
  int flag;                // one CTA-wide bit for the caller (the merge decision)
  Deal deal;               // the fp8 kernels' deal (see Deal)
};

// This thread's share of the batch: sequences [first, last), `before` units ahead of them,
// `units` of their own; `total` (W), `min_tiles` and `max_tiles` (of the sequences with any;
// INT_MAX and 0 if none) over the whole batch.
struct SeqScan {
  int first, last;
  int64_t before, units, total;
  int min_tiles, max_tiles;
};

// Block-wide: every thread takes a contiguous run of ceil(B / kThreads) sequences (any B),
// sums its units, and an exclusive scan over the threads places the runs.
template <int D>
__device__ SeqScan scan_units(const DecodeArgs& a, PlanSmem* ps) {
  const int per = (a.batch + kThreads - 1) / kThreads;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  SeqScan s;
  s.first = min(a.batch, static_cast<int>(threadIdx.x) * per);
  s.last = min(a.batch, s.first + per);
  int64_t tiles = 0;
  int min_tiles = INT_MAX, max_tiles = 0;
  for (int b = s.first; b < s.last; ++b) {
    const int t = context_tiles<D>(a.context_lens[b]);
    tiles += t;
    if (t > 0) min_tiles = min(min_tiles, t);
    max_tiles = max(max_tiles, t);
  }
  s.units = tiles * a.hkv;
  int64_t x = s.units;  // inclusive scan inside the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int64_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
    min_tiles = min(min_tiles, __shfl_xor_sync(0xffffffffu, min_tiles, o));
    max_tiles = max(max_tiles, __shfl_xor_sync(0xffffffffu, max_tiles, o));
  }
  if (lane == 31) ps->warp_units[warp] = x;
  if (lane == 0) {
    ps->warp_min_tiles[warp] = min_tiles;
    ps->warp_max_tiles[warp] = max_tiles;
  }
  __syncthreads();
  int64_t ahead = 0, total = 0;
  s.min_tiles = INT_MAX;
  s.max_tiles = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const int64_t v = ps->warp_units[w];
    if (w < warp) ahead += v;
    total += v;
    s.min_tiles = min(s.min_tiles, ps->warp_min_tiles[w]);
    s.max_tiles = max(s.max_tiles, ps->warp_max_tiles[w]);
  }
  s.before = ahead + x - s.units;
  s.total = total;
  return s;
}

// Block-wide: the sequence holding unit u (< total), its first unit and its length, into
// ps->seq, ps->seq_first_unit and ps->seq_ctx (read them after this returns; the caller syncs
// before reusing ps).
template <int D>
__device__ void locate_unit(const DecodeArgs& a, const SeqScan& s, int64_t u, PlanSmem* ps) {
  if (u >= s.before && u < s.before + s.units) {  // exactly one thread's run holds u
    int64_t first = s.before;
    for (int b = s.first; b < s.last; ++b) {
      const int ctx = a.context_lens[b];
      const int64_t n = static_cast<int64_t>(context_tiles<D>(ctx)) * a.hkv;
      if (u < first + n) {
        ps->seq = b;
        ps->seq_ctx = ctx;
        ps->seq_first_unit = first;
        break;
      }
      first += n;
    }
  }
  __syncthreads();
}

}  // namespace nanovllm::kernels::cuda::decode
