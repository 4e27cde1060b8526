// The residual add and RMSNorm of a row in 16-byte units: rms_norm.cu's vector path writes its
// rows above 8192 elements with write_normed_row (at most 8192 it keeps each thread's units in
// registers and writes the same expression), and the all-reduce + norm kernels
// (peer_all_reduce_norm.cu, copy_engine_all_reduce.cu) add and normalise with both, at
// rms_norm.cu's block size (the caller takes block_sum between the two), so each gives
// fused_add_rms_norm's bits after its sum. Moving the code here left rms_norm.cu's PTX identical
// and the other two kernels' float operations the same in kind and count (only their order among
// independent loads changed).
#pragma once

#include "kernels/cuda/common.cuh"

namespace nanovllm::kernels::cuda {

// bf16(a + b), element by element: the residual sum, rounded before the norm.
__device__ __forceinline__ Bf16x8 add_unit(const Bf16x8& a, const Bf16x8& b) {
  Bf16x8 s;
#pragma unroll
  for (int j = 0; j < 8; ++j) s.v[j] = to_bf16(to_f32(a.v[j]) + to_f32(b.v[j]));
  return s;
}

// sq plus the unit's squares, one by one in order.
__device__ __forceinline__ float add_unit_squares(float sq, const Bf16x8& a) {
#pragma unroll
  for (int j = 0; j < 8; ++j) sq += to_f32(a.v[j]) * to_f32(a.v[j]);
  return sq;
}

// bf16(a * inv * w), element by element: a normalised unit.
__device__ __forceinline__ Bf16x8 normed_unit(const Bf16x8& a, const Bf16x8& w, float inv) {
  Bf16x8 out;
#pragma unroll
  for (int j = 0; j < 8; ++j) out.v[j] = to_bf16(to_f32(a.v[j]) * inv * to_f32(w.v[j]));
  return out;
}

// residual unit rr[0..8) = bf16(y + rr); adds the new elements' squares to sq one by one.
__device__ __forceinline__ void add_residual_unit(bf16* rr, const Bf16x8& y, float& sq) {
  Bf16x8 a = load8(rr);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    a.v[j] = to_bf16(to_f32(y.v[j]) + to_f32(a.v[j]));
    sq += to_f32(a.v[j]) * to_f32(a.v[j]);
  }
  store8(rr, a);
}

// One row by a block of kThreads threads, thread k owning units k, k + kThreads, ...:
// xr[0..hidden) = bf16(rr * inv * weight). Each thread re-reads only the residual units it wrote.
template <int kThreads>
__device__ __forceinline__ void write_normed_row(bf16* xr, const bf16* rr,
                                                 const bf16* __restrict__ weight, int hidden,
                                                 float inv) {
  for (int i = threadIdx.x * 8; i < hidden; i += kThreads * 8) {
    store8(xr + i, normed_unit(load8(rr + i), load8(weight + i), inv));
  }
}

}  // namespace nanovllm::kernels::cuda
