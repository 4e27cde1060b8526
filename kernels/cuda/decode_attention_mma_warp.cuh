// One warp's state in the tensor-core decode path (decode_attention_mma.cuh), the helpers that
// say which lane holds which dims, and the V half of a tile (O^T += V^T P^T), which both score
// layouts share: Q as the MMA's A operand (decode_attention_mma.cuh) and K as it (fp8 with
// G <= 2, decode_attention_mma_kt.cuh). Included only by those two.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"
#include "kernels/cuda/fp8_kv.cuh"
#include "kernels/cuda/mma_ops.cuh"

namespace nanovllm::kernels::cuda::decode {

constexpr float kSlack = 8.f;  // log2 units: weights stay <= 256 between rescales

// fp8: the power of two that puts a head's largest |q| (mx) into [2^13, 2^14) for the f16
// MMAs: far from f16's overflow, exact otherwise.
__device__ __forceinline__ int q_f16_shift(float mx) {
  int e = 0;
  if (mx > 0.f && mx <= 3.0e38f) frexpf(mx, &e);
  return min(max(14 - e, -120), 120);
}

template <int D, int G>
constexpr bool mma_decode_supports() {
  return D == 128 && G <= 8;
}

// 32-bit word i of a 16-byte chunk.
__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The chunk of a V row that lane g reads for its m-tile rows: over g = 0..7 a permutation of
// 0..7 that puts lanes 2r and 2r + 1 four chunks apart (bank groups, swizzled_chunk).
__device__ __forceinline__ int v_chunk(int g) {
  return ((g & 1) << 2) | (g >> 1);
}

// The k-th (0..15) of the 16 head dims lane g holds of a V row: bf16, its chunks v_chunk(g)
// and 8 + v_chunk(g) (8 dims each); fp8, its chunk v_chunk(g) (16 dims). Row g of m-tile i is
// dim v_dim(g, 2i), row g + 8 is v_dim(g, 2i + 1).
template <int FP8>
__device__ __forceinline__ int v_dim(int g, int k) {
  return FP8 ? 16 * v_chunk(g) + k : 8 * (8 * (k / 8) + v_chunk(g)) + k % 8;
}

// acc's entries of heads 2t and 2t + 1 times per_row of rows 2t and 2t + 1, which lanes 8t and
// 8t + 4 hold (a row's value is the same in its 4 lanes).
__device__ __forceinline__ void scale_acc_by_row(float (&acc)[8][4], int t, float per_row) {
  const float c0 = __shfl_sync(0xffffffffu, per_row, 8 * t);
  const float c1 = __shfl_sync(0xffffffffu, per_row, 8 * t + 4);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    acc[i][0] *= c0;
    acc[i][1] *= c1;
    acc[i][2] *= c0;
    acc[i][3] *= c1;
  }
}

// One warp's part of a piece (a run of tiles of one sequence and kv head): the query
// fragments and the online softmax over the warp's rows of each tile.
struct MmaWarpState {
  // Query fragments, [k-step][a0, a2] (a1 = a3 = 0: rows g + 8 >= G): head hk * G + g's dims
  // that k-step s pairs with the K chunks lane t reads.
  uint32_t qa[8][2];
  float score_scale;
  float m, l;  // row g: running max (log2 domain), this lane's part of the sum (all of it
               // after mma_finish)
  float mv;    // fp8: running max of score + V exponent (the weights' base)
  // O^T: m-tile i, c0 c1 = dim v_dim(g, 2i) of heads 2t, 2t + 1, c2 c3 = dim v_dim(g, 2i + 1).
  float acc[8][4];
  // K as the MMA's A operand (decode_attention_mma_kt.cuh: fp8, G <= 4): a lane's scores are
  // one token's for heads 2t and 2t + 1, so it keeps both heads' scale and softmax state here
  // until mma_finish turns them into row g's m and l above; qa[0..3] hold the query fragments.
  float kt_scale[2], kt_m[2], kt_l[2], kt_mv[2];
  // int8: what the scores carry (kKv16Bias): 1152 times head g's sum of qa (Q as A), or
  // heads 2t and 2t + 1's (K as A).
  float k_bias, kt_k_bias[2];
};

// O^T += V^T P^T over the warp's 8 rows of a tile: pa is P^T's B fragment (lane (g, t): head
// g's weights of tile rows ta = 8 warp + 2t and ta + 1, f16 for fp8, bf16 for bf16), V's rows
// ta and ta + 1 give V^T's A fragments (dims v_dim(g, .)) by byte permutes.
template <int D, int FP8>
__device__ __forceinline__ void mma_accumulate_v(const unsigned char* v_tile, int ta, int g,
                                                 uint32_t pa, MmaWarpState& w) {
  using L = Layout<D, FP8>;
  const int cl = v_chunk(g);
  const unsigned char* va_row = v_tile + ta * L::kRowBytes;
  const unsigned char* vb_row = va_row + L::kRowBytes;
  if constexpr (!FP8) {
    uint4 va[2], vb[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      va[h] = *reinterpret_cast<const uint4*>(va_row + swizzled_chunk(ta, 8 * h + cl) * 16);
      vb[h] = *reinterpret_cast<const uint4*>(vb_row + swizzled_chunk(ta + 1, 8 * h + cl) * 16);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // dims v_dim(g, 2i), v_dim(g, 2i + 1): word i % 4's halves
      const uint32_t x = word(va[i / 4], i % 4), y = word(vb[i / 4], i % 4);
      mma_16808<false>(w.acc[i], __byte_perm(x, y, 0x5410), __byte_perm(x, y, 0x7632), pa);
    }
  } else {
    const uint4 va = *reinterpret_cast<const uint4*>(va_row + swizzled_chunk(ta, cl) * 16);
    const uint4 vb = *reinterpret_cast<const uint4*>(vb_row + swizzled_chunk(ta + 1, cl) * 16);
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // bytes 2i, 2i + 1: word i / 2, bytes 2 (i % 2) and + 1
      // One permute pairs both dims' bytes of the two rows: (x_2k, y_2k, x_2k+1, y_2k+1).
      const uint32_t xy = __byte_perm(word(va, i / 2), word(vb, i / 2), i % 2 ? 0x7362 : 0x5140);
      uint32_t v_lo, v_hi;
      kv8x4_to_f16x2<FP8>(xy, v_lo, v_hi);
      mma_16808<true>(w.acc[i], v_lo, v_hi, pa);
    }
  }
}

}  // namespace nanovllm::kernels::cuda::decode
