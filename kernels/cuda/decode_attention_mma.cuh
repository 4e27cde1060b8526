// The tensor-core compute of a decode-attention run (head dim 128, G <= 8 query heads per kv
// head): the same ring, plan and merges as the lane-group path (decode_attention_attend.cuh),
// with the dot products and the weighted sum of V rows on mma.sync instead of FMAs and
// shuffles. Why: the lane-group path spends about as many instructions per byte as the SM can
// issue (ncu at batch 60: 65 % of cycles issue, DRAM at 65 %), most of them the 16-lane
// shuffle sums of each score; an MMA does a warp's 8 tokens x 16 dims x 16 heads in one.
//
// Warp w owns rows 8w .. 8w + 7 of each tile and keeps its own online softmax; the 4 warps are
// merged at the end as the lane groups are. Per tile, lane (g = lane / 4, t = lane % 4):
//   S [16 heads, 8 tokens] = Q [16, 128] K^T: m16n8k16 x 8, heads as rows (rows >= G are zero),
//     the warp's 8 K rows as the B operand read straight from the ring: lane g reads row g's
//     16-byte chunks {4i + t}, and the dims a k-step sums are a fixed permutation of the head
//     dims that the query fragments follow (any permutation gives the same dot product);
//   O^T [128 dims, 8 heads] += V^T [128, 8 tokens] P^T [8 tokens, 8 heads]: m16n8k8 x 8. S's
//     accumulator layout (lane holds head g's scores of tokens 2t, 2t + 1) is exactly P^T's B
//     fragment, and V^T's A fragment pairs tokens 2t, 2t + 1 of one dim, built from those two
//     rows by byte permutes; which dims m-tile i's rows are is again a permutation (v_dims) that
//     the final store undoes. Heads on the N side keep the accumulators at 32 a lane (all used
//     at G = 8) where heads on the M side would hold 64, half of them rows >= G.
// The ring is swizzled (swizzled_chunk) so that both reads are free of bank conflicts.
//
// bf16 cache: Q, K, V, P in bf16 (P rounded as FlashAttention-2 rounds it), f32 accumulation,
// scores scaled to the log2 domain after the MMA. fp8 cache: K and V converted to f16 exactly
// (cvt e4m3x2), Q scaled per head by a power of two into f16's range, so the MMAs run in f16;
// a K row's exponent scales its score, a V row's goes into the numerator's weight, which keeps
// its own running max (mv) so that every weight stays <= 2^kSlack in f16. int8 cache: the same
// in f16, K's bytes permuted into 1024 + q + 128 (kv8x4_to_f16x2_biased) and that bias taken
// off each score once; V's converted exactly (kv8x4_to_f16x2 says why).
// fp8 with G <= 2 query heads per kv head puts K on the score MMA's A side instead
// (decode_attention_mma_kt.cuh): these functions hand it over.
// The running maxima move lazily (only when a tile's max passes them by more than kSlack, as
// FlashAttention-4 does): the rescale of 64 accumulators is rare after the first tiles.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_mma_kt.cuh"
#include "kernels/cuda/decode_attention_mma_warp.cuh"
#include "kernels/cuda/decode_attention_ring.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"
#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/mma_ops.cuh"

namespace nanovllm::kernels::cuda::decode {

// Lane (g, t)'s query fragments from the G query rows of a kv head (q0: the first, rows
// head_stride apart: in q, or a copy in shared memory), and an empty softmax state.
template <int D, int G, int FP8>
__device__ __forceinline__ void mma_start_piece(const DecodeArgs& a, const bf16* q0,
                                                int64_t head_stride, int g, int t,
                                                MmaWarpState& w) {
  if constexpr (kKAsA<G, FP8>) {
    kt_start_piece<D, G, FP8>(a, q0, head_stride, g, t, w);
    return;
  }
  w.score_scale = a.scale_log2;
  const bf16* qrow = q0 + min(g, G - 1) * head_stride;
  if constexpr (!FP8) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // dims 8 (4i + t) .. + 7: k-steps 2i (their first 4) and 2i + 1.
      const uint4 c =
          g < G ? *reinterpret_cast<const uint4*>(qrow + 8 * (4 * i + t)) : make_uint4(0, 0, 0, 0);
      w.qa[2 * i][0] = c.x;
      w.qa[2 * i][1] = c.y;
      w.qa[2 * i + 1][0] = c.z;
      w.qa[2 * i + 1][1] = c.w;
    }
  } else {
    // dims 16 (4i + t) .. + 15 for i = 0, 1: k-steps 4i .. 4i + 3, 4 dims each.
    float qf[32];
    float mx = 0.f;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const Bf16x8 v = load8(qrow + 16 * (4 * i + t) + 8 * h);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          qf[16 * i + 8 * h + j] = g < G ? to_f32(v.v[j]) : 0.f;
          mx = fmaxf(mx, fabsf(qf[16 * i + 8 * h + j]));
        }
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const int shift = q_f16_shift(mx);
    const float up = pow2i(shift);
    w.score_scale *= pow2i(-shift);
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const float* d = qf + 16 * (s / 4) + 4 * (s % 4);
      w.qa[s][0] = pack_f16x2(d[0] * up, d[1] * up);
      w.qa[s][1] = pack_f16x2(d[2] * up, d[3] * up);
    }
    if constexpr (FP8 == kCacheInt8) {  // head g's bias over its 128 dims (the quad's)
      const uint32_t(&qa16)[16] = *reinterpret_cast<const uint32_t(*)[16]>(&w.qa[0][0]);
      w.k_bias = f16x2_sum_times_bias(qa16);
      w.k_bias += __shfl_xor_sync(0xffffffffu, w.k_bias, 1);
      w.k_bias += __shfl_xor_sync(0xffffffffu, w.k_bias, 2);
    }
  }
  w.m = -INFINITY;
  w.l = 0.f;
  w.mv = -INFINITY;
#pragma unroll
  for (int i = 0; i < 8; ++i) w.acc[i][0] = w.acc[i][1] = w.acc[i][2] = w.acc[i][3] = 0.f;
}

// The warp's rows of one tile (tokens tok0 ..; K and V rows in k_tile / v_tile, swizzled, and
// fp8's exponents, K's then V's, in exps) into its state.
template <int D, int G, int FP8>
__device__ __forceinline__ void mma_attend_tile(const unsigned char* k_tile,
                                                const unsigned char* v_tile, const int8_t* exps,
                                                int tok0, int ctx, int warp, int g, int t,
                                                MmaWarpState& w) {
  if constexpr (kKAsA<G, FP8>) {
    kt_attend_tile<D, G, FP8>(k_tile, v_tile, exps, tok0, ctx, warp, g, t, w);
    return;
  }
  using L = Layout<D, FP8>;
  const int r0 = 8 * warp;    // this warp's first tile row
  const int ta = r0 + 2 * t;  // tile rows of this lane's scores: ta, ta + 1
  float s[4] = {0.f, 0.f, 0.f, 0.f};
  const unsigned char* krow = k_tile + (r0 + g) * L::kRowBytes;
  if constexpr (!FP8) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 kc = *reinterpret_cast<const uint4*>(krow + swizzled_chunk(g, 4 * i + t) * 16);
      const uint32_t a0[4] = {w.qa[2 * i][0], 0u, w.qa[2 * i][1], 0u};
      const uint32_t a1[4] = {w.qa[2 * i + 1][0], 0u, w.qa[2 * i + 1][1], 0u};
      mma_bf16_16816(s, a0, kc.x, kc.y);
      mma_bf16_16816(s, a1, kc.z, kc.w);
    }
  } else {
    // Two accumulator chains (even and odd k-steps, summed after) halve the MMAs in series
    // before the softmax (ncu: fixed-latency waits are this kernel's first stall reason).
    float s_odd[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint4 kc = *reinterpret_cast<const uint4*>(krow + swizzled_chunk(g, 4 * i + t) * 16);
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const uint32_t wd = word(kc, h);
        const uint32_t af[4] = {w.qa[4 * i + h][0], 0u, w.qa[4 * i + h][1], 0u};
        uint32_t k_lo, k_hi;
        kv8x4_to_f16x2_biased<FP8>(wd, k_lo, k_hi);
        mma_f16_16816(h % 2 ? s_odd : s, af, k_lo, k_hi);
      }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) s[k] += s_odd[k];
    if constexpr (FP8 == kCacheInt8) {  // kKv16Bias off head g's scores
      s[0] -= w.k_bias;
      s[1] -= w.k_bias;
    }
  }

  // Scores of tile rows ta, ta + 1 for head g (masked: -inf), and (fp8) plus V's exponent.
  float sc[2], sv[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const bool valid = tok0 + ta + k < ctx;
    const float k_pow = FP8 ? kv_row_decode_scale<FP8>(exps[ta + k]) : 1.f;
    sc[k] = valid ? s[k] * w.score_scale * k_pow : -INFINITY;
    sv[k] = FP8 ? sc[k] + kv_row_log2_scale<FP8>(exps[L::kTokens + ta + k]) : sc[k];
  }
  float mt = fmaxf(sc[0], sc[1]), mvt = fmaxf(sv[0], sv[1]);
#pragma unroll
  for (int o = 1; o <= 2; o <<= 1) {
    mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
    if constexpr (FP8) mvt = fmaxf(mvt, __shfl_xor_sync(0xffffffffu, mvt, o));
  }
  const bool grow = mt > w.m + kSlack || (FP8 && mvt > w.mv + kSlack);
  if (__any_sync(0xffffffffu, grow)) {
    const float m_new = fmaxf(w.m, mt);
    w.l *= fast_exp2(w.m - (m_new == -INFINITY ? 0.f : m_new));  // m = -inf -> 0
    w.m = m_new;
    const float mv_new = FP8 ? fmaxf(w.mv, mvt) : m_new;
    const float corr = fast_exp2(w.mv - (mv_new == -INFINITY ? 0.f : mv_new));
    w.mv = mv_new;
    scale_acc_by_row(w.acc, t, corr);
  }
  const float m_use = w.m == -INFINITY ? 0.f : w.m;
  const float mv_use = w.mv == -INFINITY ? 0.f : w.mv;
  float p8[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const float p = fast_exp2(sc[k] - m_use);  // masked -> 0
    w.l += p;
    p8[k] = FP8 ? fast_exp2(sv[k] - mv_use) : p;
  }
  const uint32_t pa = FP8 ? pack_f16x2(p8[0], p8[1]) : pack_bf16x2(p8[0], p8[1]);
  mma_accumulate_v<D, FP8>(v_tile, ta, g, pa, w);
}

// After a piece's last tile: l summed over the quad (every lane of row g holds head g's sum),
// and (fp8) acc moved from the base mv to l's base m (per head: lanes 8t, 8t + 4 again).
template <int G, int FP8>
__device__ __forceinline__ void mma_finish(int g, int t, MmaWarpState& w) {
  if constexpr (kKAsA<G, FP8>) {
    kt_finish(g, w);
    return;
  }
  w.l += __shfl_xor_sync(0xffffffffu, w.l, 1);
  w.l += __shfl_xor_sync(0xffffffffu, w.l, 2);
  if constexpr (FP8) {
    scale_acc_by_row(w.acc, t, w.l > 0.f ? fast_exp2((w.mv == -INFINITY ? 0.f : w.mv) - w.m) : 1.f);
  }
}

template <int D, int G, int FP8>
__device__ void attend_tiles_mma(const DecodeArgs& a, float4* smem, int b, int hk, int ctx,
                                 int first_tile, int ntiles, int64_t cell, bool& waited) {
  using L = Layout<D, FP8>;
  static_assert(mma_decode_supports<D, G>() && L::kTokens == 8 * kWarps);
  static_assert((kWarps * G * D + 2 * kWarps * G) * 4 <= L::kSmemBytes);
  const TileRing<D, FP8, true> ring(a, smem, b, hk, ctx, first_tile, ntiles);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  ring.prologue(waited);
  MmaWarpState w;
  mma_start_piece<D, G, FP8>(a, a.q + b * a.q_tok + hk * G * a.q_head, a.q_head, g, t, w);
  for (int it = 0, slot = 0; it < ntiles; ++it, slot = ring.next_slot(slot)) {
    ring.acquire(it, slot);
    mma_attend_tile<D, G, FP8>(ring.k(slot), ring.v(slot), ring.exps(slot),
                               (first_tile + it) * L::kTokens, ctx, warp, g, t, w);
  }
  mma_finish<G, FP8>(g, t, w);
  ring.drain();  // the ring is free for the merge buffers
  const GroupStates<D, G, kWarps> st(smem);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int d0 = v_dim<FP8>(g, 2 * i), d1 = v_dim<FP8>(g, 2 * i + 1);
    if (2 * t < G) {
      float* row = st.acc + (warp * G + 2 * t) * D;
      row[d0] = w.acc[i][0];
      row[d1] = w.acc[i][2];
    }
    if (2 * t + 1 < G) {
      float* row = st.acc + (warp * G + 2 * t + 1) * D;
      row[d0] = w.acc[i][1];
      row[d1] = w.acc[i][3];
    }
  }
  if (g < G && t == 0) {
    st.m[warp * G + g] = w.m;
    st.l[warp * G + g] = w.l;
  }
  __syncthreads();
  write_merged<D, G, kWarps>(a, st, b, hk, cell);
}

}  // namespace nanovllm::kernels::cuda::decode
