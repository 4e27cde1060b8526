// The qkv projection's epilogue in the Hopper decode GEMM (kernels/hopper_gemm.h's
// hopper_gemm_qkv_rope): what kernels/cuda/rotary.cu's qk_norm_rope_store does after the GEMM,
// done on the sums before they leave the GEMM, bit for bit the same.
//
// The GEMM runs blocks of 128 weight rows, so a tile is one head of D = 128 (q heads, then k,
// then v), and the sum hands each warp whole (token, head) rows: lane l holds the head's
// dimensions 4l .. 4l + 3. Of a q or k head the warp computes the per-head RMSNorm and the
// neox rotary (dimension d pairs with d + 64, held by lane l ^ 16); k and v rows also go to the
// paged bf16 KV cache at the token's slot.
//
// Bit-identity with the separate kernel: there lane l owns dimensions l, l + 32, l + 64 and
// l + 96 and sums their squares as (x_l^2 + x_{l+64}^2) + (x_{l+32}^2 + x_{l+96}^2) before the
// warp's butterfly; here each lane gathers those four values through shuffles and sums them in
// that order, and both kernels round each operation alike (qk_norm_rope_math.cuh), so the norm's
// scale, and with it every output, is the same float.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/qk_norm_rope_math.cuh"

namespace nanovllm::kernels::cuda::hgemm {

constexpr int kRopeHeadDim = 128;  // one tile of 128 weight rows is one head

struct RopeEpilogue {
  const bf16* q_w;              // [D] q RMSNorm weight, or null (no norm)
  const bf16* k_w;              // [D] k RMSNorm weight, or null
  const int32_t* positions;     // [M]
  const float* inv_freq;        // [D / 2]
  const int32_t* slot_mapping;  // [M], -1: the token is not stored
  bf16* k_cache;                // [slots, hkv, D] (slot = block * block_size + offset)
  bf16* v_cache;
  int hq, hkv;
  float eps, attention_scaling;
};

// Dimension e of the warp's row (lane e / 4, element e % 4), for e with e % 4 == lane % 4.
__device__ __forceinline__ float row_element(const float (&x)[4], int e, int lane) {
  const float a0 = __shfl_sync(0xffffffffu, x[0], e >> 2);
  const float a1 = __shfl_sync(0xffffffffu, x[1], e >> 2);
  const float a2 = __shfl_sync(0xffffffffu, x[2], e >> 2);
  const float a3 = __shfl_sync(0xffffffffu, x[3], e >> 2);
  const int k = lane & 3;
  return k == 0 ? a0 : k == 1 ? a1 : k == 2 ? a2 : a3;
}

__device__ __forceinline__ void store4(bf16* dst, const float (&x)[4]) {
  __align__(8) bf16 v[4] = {to_bf16(x[0]), to_bf16(x[1]), to_bf16(x[2]), to_bf16(x[3])};
  *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(v);
}

// What a lane's row needs besides the sums, loaded and computed before the split-K sum (after
// the kernel's griddepcontrol.wait, since the step's positions and slots may come from a
// kernel), so that the loads' and sines' latency overlaps the cluster barrier.
struct RopeRowInputs {
  float cos[4], sin[4];  // of the lane's dimensions at the token's position, scaled
  float weight[4];       // the head's RMSNorm weight at them (q or k; unused for v)
  int64_t slot;          // the token's cache slot, -1: none
};

__device__ __forceinline__ RopeRowInputs rope_row_inputs(const RopeEpilogue& r, int token, int head,
                                                         int lane) {
  constexpr int D = kRopeHeadDim;
  const int d0 = 4 * lane;
  RopeRowInputs in;
  const bf16* w = head < r.hq ? r.q_w : r.k_w;
  const float pos = static_cast<float>(r.positions[token]);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    in.weight[i] = w != nullptr ? to_f32(w[d0 + i]) : 1.f;
    const float angle = pos * r.inv_freq[(d0 + i) & (D / 2 - 1)];
    sincosf(angle, &in.sin[i], &in.cos[i]);
    in.cos[i] *= r.attention_scaling;
    in.sin[i] *= r.attention_scaling;
  }
  in.slot = head >= r.hq ? r.slot_mapping[token] : -1;
  return in;
}

// The whole warp: its row of head `head` for `token`, from the four sums of lane `lane`
// (dimensions 4 lane ..) and that lane's rope_row_inputs; y: the qkv output
// [M, (hq + 2 hkv) D] bf16, row stride ldy.
__device__ __forceinline__ void store_rope_row(const RopeEpilogue& r, bf16* y, int64_t ldy,
                                               int token, int head, int lane, const float4& sum,
                                               const RopeRowInputs& in) {
  constexpr int D = kRopeHeadDim;
  // The GEMM's output, rounded to bf16 as qkv holds it before the separate kernel reads it.
  float x[4] = {to_f32(to_bf16(sum.x)), to_f32(to_bf16(sum.y)), to_f32(to_bf16(sum.z)),
                to_f32(to_bf16(sum.w))};
  const int d0 = 4 * lane;
  if (head < r.hq + r.hkv) {
    if ((head < r.hq ? r.q_w : r.k_w) != nullptr) {
      const float lo0 = row_element(x, lane, lane), hi0 = row_element(x, lane + 64, lane);
      const float lo1 = row_element(x, lane + 32, lane), hi1 = row_element(x, lane + 96, lane);
      const float sq = add_pair_squares(add_pair_squares(0.f, lo0, hi0), lo1, hi1);
      const float inv = head_rms_inverse<D>(warp_sum(sq), r.eps);
#pragma unroll
      for (int i = 0; i < 4; ++i) x[i] = head_norm_scale(x[i], inv, in.weight[i]);
    }
    const bool lo_half = lane < 16;  // dimensions 0..63 pair with the next 64
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float other = __shfl_xor_sync(0xffffffffu, x[i], 16);
      const float c = in.cos[i], s = in.sin[i];
      x[i] = to_f32(to_bf16(lo_half ? rotate_lo(x[i], other, c, s) : rotate_hi(other, x[i], c, s)));
    }
  }
  store4(y + token * ldy + head * D + d0, x);
  if (in.slot < 0) return;  // q heads, and tokens without a slot
  const bool is_k = head < r.hq + r.hkv;
  const int kv_head = is_k ? head - r.hq : head - r.hq - r.hkv;
  store4((is_k ? r.k_cache : r.v_cache) + (in.slot * r.hkv + kv_head) * D + d0, x);
}

}  // namespace nanovllm::kernels::cuda::hgemm
