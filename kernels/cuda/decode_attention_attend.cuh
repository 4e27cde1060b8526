// The decode-attention work of one CTA on one run of tiles: the online softmax of a kv head's
// G query heads over tiles [first_tile, first_tile + ntiles) of one sequence, streamed through
// the cp.async ring (decode_attention_tile.cuh), then the lane groups merged and the result
// written as output or as a partial. Included only by decode_attention.cu (kept apart to keep
// files small).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_ring.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"
#include "kernels/cuda/fp8_kv.cuh"

namespace nanovllm::kernels::cuda::decode {

// A lane's 8 values of a cached row in shared memory, as f32 (8-bit caches: unscaled).
template <int FP8>
__device__ __forceinline__ void load_row8(const unsigned char* p, float* out) {
  if constexpr (FP8) {
    kv8x8_to_f32<FP8>(*reinterpret_cast<const uint2*>(p), out);
  } else {
    const Bf16x8 r = *reinterpret_cast<const Bf16x8*>(p);
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = to_f32(r.v[j]);
  }
}

// Query heads hk * G .. hk * G + G - 1 of sequence b over tiles [first_tile, first_tile +
// ntiles) of its context (ctx tokens). cell < 0: writes the bf16 output (the run is the whole
// context); else the normalised partial and its log2-sum-exp into scratch cell `cell`. Uses
// all of smem ([kSmemBytes] bytes); the caller syncs before reusing it.
//
// waited (CTA-uniform): whether this CTA has waited for the previous kernel yet. If not, the
// tiles that kernel cannot have written (all but the sequence's last, which holds the new
// token's k and v) are put in flight first and the wait comes only before the last tile or the
// query (the previous kernel's output): the cache reads overlap that kernel's tail.
//
// FP8: a K row's exponent scales its score after the dot product, a V row's folds into its
// softmax weight; the sum of the weights (l) stays unscaled.
template <int D, int G, int FP8>
__device__ void attend_tiles(const DecodeArgs& a, float4* smem, int b, int hk, int ctx,
                             int first_tile, int ntiles, int64_t cell, bool& waited) {
  using L = Layout<D, FP8>;
  const TileRing<D, FP8, false> ring(a, smem, b, hk, ctx, first_tile, ntiles);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int dl = lane % L::kLanes, group = warp * L::kRows + lane / L::kLanes;
  ring.prologue(waited);

  float q[G][8];  // this lane's 8 dims of each query head, pre-scaled to the log2 domain
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const Bf16x8 v = load8(a.q + b * a.q_tok + (hk * G + g) * a.q_head + dl * 8);
#pragma unroll
    for (int j = 0; j < 8; ++j) q[g][j] = to_f32(v.v[j]) * a.scale_log2;
  }
  float m[G], l[G], acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.f;
  }

  for (int t = 0, slot = 0; t < ntiles; ++t, slot = ring.next_slot(slot)) {
    ring.acquire(t, slot);
    const int tok0 = (first_tile + t) * L::kTokens;
    // This lane's 8 dims of row `group`; row u * kGroups + group is u * kGroups rows further.
    const unsigned char* ks = ring.k(slot) + (group * D + dl * 8) * L::kElemBytes;
    const unsigned char* vs = ring.v(slot) + (group * D + dl * 8) * L::kElemBytes;
    const int8_t* ek = ring.exps(slot) + group;  // row u: ek[u * kGroups]
    const int8_t* ev = ek + L::kTokens;
    // Scores of this group's kSteps tokens (rows u * kGroups + group); every lane runs every
    // shuffle (no branch around them), masked tokens become -inf afterwards.
    float sc[kSteps][G];
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      float kf[8];
      load_row8<FP8>(ks + u * L::kGroups * L::kRowBytes, kf);
      const float k_pow = FP8 ? kv_row_decode_scale<FP8>(ek[u * L::kGroups]) : 1.f;
      const bool valid = tok0 + u * L::kGroups + group < ctx;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < 8; ++j) s = fmaf(q[g][j], kf[j], s);
          // xor < kLanes stays inside a lane group.
#pragma unroll
        for (int o = L::kLanes / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        sc[u][g] = valid ? s * k_pow : -INFINITY;
      }
    }
    // One online-softmax rescale per tile; masked tokens get p = 0 (their V is zero-filled,
    // never NaN, so p * v = 0).
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mt = sc[0][g];
#pragma unroll
      for (int u = 1; u < kSteps; ++u) mt = fmaxf(mt, sc[u][g]);
      const float m_new = fmaxf(m[g], mt);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float corr = fast_exp2(m[g] - m_use);  // m[g] = -inf -> 0
      m[g] = m_new;
      l[g] *= corr;
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[g][j] *= corr;
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        sc[u][g] = fast_exp2(sc[u][g] - m_use);  // now p; masked -> 0
        l[g] += sc[u][g];
      }
    }
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      float vf[8];
      load_row8<FP8>(vs + u * L::kGroups * L::kRowBytes, vf);
      const float v_pow = FP8 ? kv_row_decode_scale<FP8>(ev[u * L::kGroups]) : 1.f;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = sc[u][g] * v_pow;
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[g][j] = fmaf(p, vf[j], acc[g][j]);
      }
    }
  }
  ring.drain();  // the ring is free for the merge buffers
  const GroupStates<D, G, L::kGroups> st(smem);
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) st.acc[(group * G + g) * D + dl * 8 + j] = acc[g][j];
    if (dl == 0) {
      st.m[group * G + g] = m[g];
      st.l[group * G + g] = l[g];
    }
  }
  __syncthreads();
  write_merged<D, G, L::kGroups>(a, st, b, hk, cell);
}

}  // namespace nanovllm::kernels::cuda::decode
