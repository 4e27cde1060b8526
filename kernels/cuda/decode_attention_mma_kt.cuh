// The fp8 tensor-core decode tile with K as the score MMA's A operand, at G <= 2 query heads per
// kv head (Qwen3-0.6B and -1.7B). Why: with Q as A (decode_attention_mma.cuh) a score MMA has 16
// rows of which only G are heads; rows 8..15 are zero registers that ptxas re-makes before every
// MMA (ncu: 16 `IMAD.MOV Rx, RZ` of the fp8 stream loop's instructions a tile), and 8 MMAs cover
// a warp's 8 tokens.
//
// Here the 16 rows are the warp's 8 tokens twice: row g holds token g's dims of the row's first
// half, row g + 8 the same token's second half; the 8 columns are the heads' first-half dims
// (columns 0..3) and second-half dims (columns 4..7). Score (token g, head j) = C[g][j] +
// C[g + 8][j + 4]: 4 MMAs a tile instead of 8, no zero fragments, half the query registers. The
// K words a lane reads and converts are Q-as-A's (chunks t and 4 + t of row g), so the query
// fragments follow the same permutation of the head dims.
//
// Lane (g, t) then holds token 8 warp + g's scores of heads 2t and 2t + 1 (t < 2), so it keeps
// both heads' softmax state (MmaWarpState::kt_*); the rescale of its accumulators (heads 2t and
// 2t + 1 as well) needs no shuffles, and the running maxima are reduced over the warp's tokens
// only when some score passes them by more than kSlack. movmatrix.trans turns the weights
// [token][head] into P^T's B fragment for the V half, which is Q-as-A's (mma_accumulate_v).
//
// One H200, 8 kv heads, kernel alone (bench/results/h200-2026-11-27-issue34_k_as_a.txt): G 2
// 1-6 % faster (batch 64 at 1025 tokens 37.3 -> 35.0 us, 256 at 1025 138.7 -> 137.0); ptxas's
// spills in the fp8 G <= 2 kernels went from up to 52 bytes to none (24/28 in the fused stream
// kernel). The layout takes G <= 4, but at G 4 (the 8B shape) it ran 1.4-1.8 % slower than Q as
// A at batch 64-2048, so G 3-8 keep Q as A.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_mma_warp.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"
#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/mma_ops.cuh"

namespace nanovllm::kernels::cuda::decode {

template <int G, int FP8>
constexpr bool kKAsA = FP8 && (G <= 2);

// The running maxima's start: finite and below any score, so that no tile needs the -inf
// special cases (-inf - -inf = NaN) that Q-as-A's state carries; kt_finish hands an empty
// head's m over as -inf, as the merges expect.
constexpr float kNoMax = -1e30f;

// An 8 x 8 b16 matrix in mma fragments (lane (g, t): row g, columns 2t and 2t + 1), transposed.
__device__ __forceinline__ uint32_t transpose_8x8_b16(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// Lane (g, t)'s query fragments (B column g: head g & 3's dims of half g >> 2, the 16 dims of
// chunk 4 (g >> 2) + t, 4 a k-step), scaled per head by a power of two into f16's range as
// Q-as-A's are, and an empty softmax state for heads 2t and 2t + 1.
template <int D, int G, int FP8>
__device__ __forceinline__ void kt_start_piece(const DecodeArgs& a, const bf16* q0,
                                               int64_t head_stride, int g, int t, MmaWarpState& w) {
  static_assert(D == 128 && G <= 4);
  const int head = g & 3, half = g >> 2;
  const bf16* qrow = q0 + min(head, G - 1) * head_stride;
  float qf[16];
  float mx = 0.f;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const Bf16x8 v = load8(qrow + 16 * (4 * half + t) + 8 * h);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      qf[8 * h + j] = head < G ? to_f32(v.v[j]) : 0.f;
      mx = fmaxf(mx, fabsf(qf[8 * h + j]));
    }
  }
  // The head's 128 dims: its 4 lanes of each half, the halves 16 lanes apart.
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
  const int shift = q_f16_shift(mx);
  const float up = pow2i(shift);
  const float scale = a.scale_log2 * pow2i(-shift);  // head's
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    w.qa[s][0] = pack_f16x2(qf[4 * s] * up, qf[4 * s + 1] * up);
    w.qa[s][1] = pack_f16x2(qf[4 * s + 2] * up, qf[4 * s + 3] * up);
  }
  // Heads 2t and 2t + 1's scales from lanes (2t, 0) and (2t + 1, 0).
  w.kt_scale[0] = __shfl_sync(0xffffffffu, scale, 8 * t);
  w.kt_scale[1] = __shfl_sync(0xffffffffu, scale, 8 * t + 4);
  if constexpr (FP8 == kCacheInt8) {  // the head's bias over its 128 dims, as mx above
    const uint32_t(&qa4)[8] = *reinterpret_cast<const uint32_t(*)[8]>(&w.qa[0][0]);
    float bias = f16x2_sum_times_bias(qa4);
    bias += __shfl_xor_sync(0xffffffffu, bias, 1);
    bias += __shfl_xor_sync(0xffffffffu, bias, 2);
    bias += __shfl_xor_sync(0xffffffffu, bias, 16);
    w.kt_k_bias[0] = __shfl_sync(0xffffffffu, bias, 8 * t);
    w.kt_k_bias[1] = __shfl_sync(0xffffffffu, bias, 8 * t + 4);
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    w.kt_m[k] = kNoMax;
    w.kt_l[k] = 0.f;
    w.kt_mv[k] = kNoMax;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) w.acc[i][0] = w.acc[i][1] = w.acc[i][2] = w.acc[i][3] = 0.f;
}

// acc's entries of head 2t + k (k = 0, 1) times c.
__device__ __forceinline__ void kt_scale_acc(float (&acc)[8][4], int k, float c) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    acc[i][k] *= c;
    acc[i][2 + k] *= c;
  }
}

// The warp's rows of one tile (tokens tok0 ..; K and V rows swizzled, K's exponents then V's in
// exps) into its state. FP8: kCacheE4m3 or kCacheInt8.
template <int D, int G, int FP8>
__device__ __forceinline__ void kt_attend_tile(const unsigned char* k_tile,
                                               const unsigned char* v_tile, const int8_t* exps,
                                               int tok0, int ctx, int warp, int g, int t,
                                               MmaWarpState& w) {
  using L = Layout<D, true>;
  const int row = 8 * warp + g;  // the tile row whose scores this lane holds
  const unsigned char* krow = k_tile + row * L::kRowBytes;
  const uint4 k0 = *reinterpret_cast<const uint4*>(krow + swizzled_chunk(g, t) * 16);
  const uint4 k1 = *reinterpret_cast<const uint4*>(krow + swizzled_chunk(g, 4 + t) * 16);
  // Two accumulator chains (even and odd k-steps), as Q-as-A's: fewer MMAs in series.
  float c[4] = {0.f, 0.f, 0.f, 0.f}, c_odd[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    uint32_t af[4];
    kv8x4_to_f16x2_biased<FP8>(word(k0, s), af[0], af[2]);
    kv8x4_to_f16x2_biased<FP8>(word(k1, s), af[1], af[3]);
    mma_f16_16816(s % 2 ? c_odd : c, af, w.qa[s][0], w.qa[s][1]);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) c[k] += c_odd[k];
  if constexpr (FP8 == kCacheInt8) {  // kKv16Bias off each head's score (c0 c1 after the sum)
    c[0] -= w.kt_k_bias[0];
    c[1] -= w.kt_k_bias[1];
  }
  // Heads 2t and 2t + 1: first halves in c0 c1, second halves in lane (g, t + 2)'s c2 c3.
  const float half1[2] = {__shfl_xor_sync(0xffffffffu, c[2], 2),
                          __shfl_xor_sync(0xffffffffu, c[3], 2)};
  const bool valid = tok0 + row < ctx;
  const float k_pow = kv_row_decode_scale<FP8>(exps[row]);
  const float v_exp = kv_row_log2_scale<FP8>(exps[L::kTokens + row]);
  float sc[2], sv[2];
  bool grow = false;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    sc[k] = valid && 2 * t + k < G ? (c[k] + half1[k]) * w.kt_scale[k] * k_pow : -INFINITY;
    sv[k] = sc[k] + v_exp;
    grow |= sc[k] > w.kt_m[k] + kSlack || sv[k] > w.kt_mv[k] + kSlack;
  }
  if (__any_sync(0xffffffffu, grow)) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float mt = sc[k], mvt = sv[k];
#pragma unroll
      for (int o = 4; o <= 16; o <<= 1) {  // over the warp's 8 tokens
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        mvt = fmaxf(mvt, __shfl_xor_sync(0xffffffffu, mvt, o));
      }
      const float m_new = fmaxf(w.kt_m[k], mt), mv_new = fmaxf(w.kt_mv[k], mvt);
      w.kt_l[k] *= fast_exp2(w.kt_m[k] - m_new);  // from kNoMax: 0 (l was 0)
      w.kt_m[k] = m_new;
      kt_scale_acc(w.acc, k, fast_exp2(w.kt_mv[k] - mv_new));
      w.kt_mv[k] = mv_new;
    }
  }
  float p8[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    w.kt_l[k] += fast_exp2(sc[k] - w.kt_m[k]);  // masked -> 0
    p8[k] = fast_exp2(sv[k] - w.kt_mv[k]);
  }
  // [token g][heads 2t, 2t + 1] transposed: head g's weights of rows 2t and 2t + 1 (zero for
  // heads >= G), P^T's B fragment.
  mma_accumulate_v<D, FP8>(v_tile, 8 * warp + 2 * t, g, transpose_8x8_b16(pack_f16x2(p8[0], p8[1])),
                           w);
}

// After a piece's last tile: each head's sum over the warp's tokens, acc moved from the base mv
// to l's base m, and row g's m and l (head g: lane (0, g / 2)'s) where the merges read them.
__device__ __forceinline__ void kt_finish(int g, MmaWarpState& w) {
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    float l = w.kt_l[k];
#pragma unroll
    for (int o = 4; o <= 16; o <<= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    w.kt_l[k] = l;
    kt_scale_acc(w.acc, k, l > 0.f ? fast_exp2(w.kt_mv[k] - w.kt_m[k]) : 1.f);
    if (!(l > 0.f)) w.kt_m[k] = -INFINITY;  // no token: the merges' empty state
  }
  const float m0 = __shfl_sync(0xffffffffu, w.kt_m[0], g >> 1);
  const float m1 = __shfl_sync(0xffffffffu, w.kt_m[1], g >> 1);
  const float l0 = __shfl_sync(0xffffffffu, w.kt_l[0], g >> 1);
  const float l1 = __shfl_sync(0xffffffffu, w.kt_l[1], g >> 1);
  w.m = g & 1 ? m1 : m0;
  w.l = g & 1 ? l1 : l0;
}

}  // namespace nanovllm::kernels::cuda::decode
