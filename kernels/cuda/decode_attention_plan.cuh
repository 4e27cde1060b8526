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

#include "kernels/cuda/decode_attention_deal.h"
#include "kernels/cuda/decode_attention_tile.cuh"

namespace nanovllm::kernels::cuda::decode {

// Tiles a CTA loads at once when it starts (kStages - 1): ranges shorter than that inside one
// group cost no less time, they only add partials to merge.
constexpr int kMinQuota = kStages - 1;

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
