// The tensor-core decode path over a CTA's whole range of units at once (G <= 2 query heads per
// kv head: Qwen3-0.6B and -1.7B; any cache dtype): one cp.async ring streams the range's tiles
// across its pieces (runs of one sequence and kv head), and each piece's first acquire also copies
// the next piece's query into shared memory, so a piece starts with its tiles and its query already
// there; decode_split_kernel's piece-by-piece loop drains the ring and refills it at every piece.
// Included only by decode_attention.cu.
//
// Why: at equal bytes, short pieces made the fp8 kernel slow (H200, 8 kv heads, G 2, 4 M
// tokens: 2048 sequences of 128 tokens 0.55 of copy bandwidth, 256 of 1024 0.89, 64 of 4096
// 0.95), about 3.3 us a piece against bf16's 0.8: each piece waited for its first tiles with
// nothing else in flight. With this path (bench/results/h200-2026-11-27-issue34_piece_
// overhead.txt): 2048 x 128 231.0 -> 221.3 us, batch 256 at mixed lengths 179.5 -> 166.9;
// whole runs of the 0.6B with an fp8 cache +2.8 % (nano-vllm's workload) and +3.5 % (256 x
// 512/512). It costs 0.4-1.1 us a call at batches of 1-16, where the piece-by-piece walk is
// kept (decode_attention_walk.h).
// G = 4 spilled registers on this path and keeps the piece-by-piece loop (with K as the score
// MMA's A operand too: 248 bytes in the fused kernel, and 1.37-1.49x the pieces walk's time at
// batch 256-2048 on an H200; bench/results/h200-2026-11-27-issue34_k_as_a.txt).
//
// The bf16 cache takes the same walk (its pieces cost about 0.8 us each); it pays inside the
// decode step at batch 128-256 (decode_attention_walk.h).
//
// Shared memory: the fp8 ring takes Layout<D, true>'s 5 stages (41,280 bytes at D = 128) of
// the kernel's 48 KiB; the bf16 ring Layout<D>'s 3 stages (48 KiB), so that kernel takes its
// shared memory dynamically (stream_smem_bytes). The rest holds what a piece's end needs
// besides the ring (StreamSpare) and, at the very end, the plan (PlanSmem).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_mma.cuh"
#include "kernels/cuda/decode_attention_plan.cuh"
#include "kernels/cuda/decode_attention_stream_ring.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"

namespace nanovllm::kernels::cuda::decode {

// Shared memory past the ring: the warps' m and l at a piece's end ([warp][2][8] f32), two
// query buffers ([2][G, D] bf16: this piece's and the next one's), merge_group's stage.
template <int D, int G>
struct StreamSpare {
  static constexpr int kMlBytes = kWarps * 2 * 8 * 4;
  static constexpr int kQBytes = G * D * 2;
  static constexpr int kBytes = kMlBytes + 2 * kQBytes + kThreads * 24;
  float* ml;
  bf16* q[2];
  float4* stage;
  __device__ explicit StreamSpare(float4* base)
      : ml(reinterpret_cast<float*>(base)),
        q{reinterpret_cast<bf16*>(ml + kWarps * 16),
          reinterpret_cast<bf16*>(ml + kWarps * 16) + G * D},
        stage(reinterpret_cast<float4*>(q[1] + G * D)) {}
};

// The split kernel's shared memory on the streamed walk: the 8-bit rings fit the static 48 KiB
// (Layout<D>::kSmemBytes); bf16's ring, the spare and the plan, rounded to 16 bytes, dynamic.
template <int D, int G, int FP8>
constexpr int stream_smem_bytes() {
  if constexpr (FP8 != 0) {
    return Layout<D>::kSmemBytes;
  } else {
    constexpr int bytes =
        StreamRing<D, false>::kRingBytes + StreamSpare<D, G>::kBytes + int{sizeof(PlanSmem)};
    return (bytes + 15) / 16 * 16;
  }
}

// Whether a piece ends here and how: the 4 warps' states (mma_finish done) go to the K and V
// halves of the slot the piece's last tile used (free until the next acquire; every warp is
// past its reads of it) and their m and l to spare.ml; then every thread merges some of the
// G * D outputs and writes them (cell < 0) or the normalised partial and its log2-sum-exp.
// Only the lanes holding heads < G store: lanes (g, t < T), T = (G + 1) / 2, at [i][g][t]
// float4s, warps 0 and 1 in the K half, 2 and 3 in the V half. (The merge's reads take 8
// wavefronts a warp instead of 2; [g][t][i ^ g] avoids that but raised this kernel's spills
// from 28 to 64 bytes, and the path's cost at small batches is its per-piece work, not these
// reads: the split kernel walks piece by piece there, decode_attention_walk.h.)
template <int D, int G, int FP8>
__device__ void merge_warps_and_write(const DecodeArgs& a, unsigned char* k_slot,
                                      unsigned char* v_slot, float* ml, int b, int hk, int64_t cell,
                                      const MmaWarpState& w) {
  constexpr int T = (G + 1) / 2;
  constexpr int kWarpFloat4s = 8 * 8 * T;
  static_assert(D == 128 && 2 * kWarpFloat4s * 16 <= Layout<D, FP8 != 0>::kTileBytes);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const auto region = [&](int r) {
    return reinterpret_cast<float4*>(r < 2 ? k_slot : v_slot) + (r & 1) * kWarpFloat4s;
  };
  __syncthreads();  // every warp is done with the slot's tile
  if (t < T) {
    float4* const st = region(warp);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      st[(i * 8 + g) * T + t] = make_float4(w.acc[i][0], w.acc[i][1], w.acc[i][2], w.acc[i][3]);
  }
  if (t == 0) {
    ml[warp * 16 + g] = w.m;
    ml[warp * 16 + 8 + g] = w.l;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += kThreads) {
    const int h = idx / D, d = idx % D;
    // Which lane and accumulator held (head h, dim d): d = v_dim<FP8>(g, k), fp8 16 v_chunk(g) +
    // k, bf16 8 (8 (k / 8) + v_chunk(g)) + k % 8.
    const int vc = FP8 ? d / 16 : d / 8 % 8, k = FP8 ? d % 16 : 8 * (d / 64) + d % 8;
    const int gd = ((vc & 3) << 1) | (vc >> 2);  // v_chunk's inverse
    const int at = ((k >> 1) * 8 + gd) * T + (h >> 1);
    const int comp = (k & 1) * 2 + (h & 1);
    float m_r[kWarps], mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < kWarps; ++r) {
      m_r[r] = ml[r * 16 + h];
      mx = fmaxf(mx, m_r[r]);
    }
    float sum = 0.f, o = 0.f;
#pragma unroll
    for (int r = 0; r < kWarps; ++r) {
      const float wt = mx == -INFINITY ? 0.f : fast_exp2(m_r[r] - mx);  // empty warp: 0
      const float4 v = region(r)[at];
      sum += ml[r * 16 + 8 + h] * wt;
      o += (comp == 0 ? v.x : comp == 1 ? v.y : comp == 2 ? v.z : v.w) * wt;
    }
    store_merged<D, G>(a, b, hk, cell, h, d, o, sum, mx);
  }
}

// CTA j's units [begin, end) (of sequence b, length ctx, whose first unit is seq_first),
// block-wide: every piece's output or partial, and with counters (kFused) the merge of a split
// group by its last CTA, as decode_split_kernel's loop does piece by piece. Each piece's first
// acquire also copies the next piece's query into shared memory, in the same commit group as
// the tile kStages - 1 ahead: a piece of at least kStages - 1 tiles has it landed by the next
// piece's first acquire; after a shorter one the ring is drained first. FP8: 0 (bf16),
// kCacheE4m3 or kCacheInt8 (the 8-bit caches share a ring; only the conversion differs).
template <int D, int G, bool kFused, int FP8>
__device__ void attend_range_streamed(const DecodeArgs& a, float4* smem, PlanSmem* ps,
                                      const Deal& deal, int64_t j, int64_t begin, int64_t end,
                                      int b, int ctx, int64_t seq_first, bool& waited) {
  using L = Layout<D, FP8 != 0>;
  using Ring = StreamRing<D, FP8 != 0>;
  using Spare = StreamSpare<D, G>;
  static_assert(mma_decode_supports<D, G>() && L::kTokens == 8 * kWarps && G <= 2);
  static_assert(Ring::kRingBytes % 16 == 0 && Spare::kMlBytes % 16 == 0 &&
                Spare::kQBytes % 16 == 0);
  static_assert(Ring::kRingBytes + Spare::kBytes + sizeof(PlanSmem) <=
                stream_smem_bytes<D, G, FP8>());
  const Spare spare(smem + Ring::kRingBytes / 16);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int n = static_cast<int>(end - begin);        // <= the quota
  UnitPos p = unit_pos<D>(b, ctx, seq_first, begin);  // the piece's first unit
  Ring ring(a, smem, p, n);
  ring.prologue(waited);
  wait_once(waited);  // the queries are the previous kernel's output
  MmaWarpState w;
  // The first piece's query from q, while the prologue's tiles are in flight (as main's
  // per-piece loop loads it); the others' come through the ring.
  mma_start_piece<D, G, FP8>(a, a.q + p.b * a.q_tok + p.hk * G * a.q_head, a.q_head, g, t, w);
  int parity = 0, q_landed_at = 0;  // this piece's query buffer; the acquire that lands it
  for (int i = 0, slot = 0; i < n; ++i, slot = Ring::next_slot(slot), parity ^= 1) {
    const int first = i;  // the piece's first unit, from begin
    const int last = min(n - 1, i + p.tiles - 1 - p.tile);
    UnitPos pn = p;  // the next piece's first unit
    if (last + 1 < n) {
      pn.tile += last - first;
      pn = next_unit<D>(a, pn);
    }
    ring.acquire(i, slot, [&] {
      if (last + 1 < n && threadIdx.x < G * D / 8) {  // 16-byte pieces of the next query
        const int h = threadIdx.x / (D / 8), c = threadIdx.x % (D / 8);
        cp_async16(spare.q[parity ^ 1] + h * D + c * 8,
                   a.q + pn.b * a.q_tok + (pn.hk * G + h) * a.q_head + c * 8, true);
      }
    });
    if (i > 0) {
      if (i < q_landed_at) ring.drain();  // a short piece before: the copy may be in flight
      mma_start_piece<D, G, FP8>(a, spare.q[parity], D, g, t, w);
    }
    q_landed_at = i + Ring::kStages - 1;
    for (int tok0 = p.tile * L::kTokens;; tok0 += L::kTokens) {
      mma_attend_tile<D, G, FP8>(ring.k_ring + slot * L::kTileBytes,
                                 ring.v_ring + slot * L::kTileBytes,
                                 ring.e_ring + slot * L::kExpBytes, tok0, p.ctx, warp, g, t, w);
      if (i == last) break;
      ++i;
      slot = Ring::next_slot(slot);
      ring.acquire(i, slot, [] {});
    }
    mma_finish<G, FP8>(g, t, w);
    const int first_tile = p.tile;
    const int64_t group_begin = begin + first - first_tile;
    p.tile += last - first;  // the piece's last unit
    const bool whole = first_tile == 0 && p.group_last();
    merge_warps_and_write<D, G, FP8>(a, ring.k_ring + slot * L::kTileBytes,
                                     ring.v_ring + slot * L::kTileBytes, spare.ml, p.b, p.hk,
                                     whole ? -1 : partial_cell(deal, j, begin + first), w);
    if constexpr (kFused) {
      if (!whole)
        merge_if_last<D, G>(a, spare.stage, ps, p.b, p.hk, group_begin, group_begin + p.tiles,
                            deal);
    }
    p = pn;
  }
  ring.drain();
}

}  // namespace nanovllm::kernels::cuda::decode
