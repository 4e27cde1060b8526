// The arithmetic of Qwen3's per-head q/k RMSNorm and neox rotary, shared by the separate kernel
// (kernels/cuda/rotary.cu) and the Hopper GEMM's qkv epilogue (hopper_gemm_rope.cuh) so that
// both give the same bits: every product and sum is rounded on its own (__fmul_rn /
// __fadd_rn), since the compiler may otherwise contract a different pair into an FMA in each
// kernel.
#pragma once

namespace nanovllm::kernels::cuda {

// A lane's share of a head's sum of squares: its pairs (lo_j, hi_j) in order j = 0, 1, ...
__device__ __forceinline__ float add_pair_squares(float sq, float lo, float hi) {
  return __fadd_rn(sq, __fadd_rn(__fmul_rn(lo, lo), __fmul_rn(hi, hi)));
}
// 1 / rms of a head of D values from the warp's total of squares.
template <int D>
__device__ __forceinline__ float head_rms_inverse(float sum_sq, float eps) {
  return rsqrtf(__fadd_rn(__fdiv_rn(sum_sq, static_cast<float>(D)), eps));
}
// x * inv * weight, left to right.
__device__ __forceinline__ float head_norm_scale(float x, float inv, float weight) {
  return __fmul_rn(__fmul_rn(x, inv), weight);
}
// The rotated pair: lo * c - hi * s and hi * c + lo * s.
__device__ __forceinline__ float rotate_lo(float lo, float hi, float c, float s) {
  return __fsub_rn(__fmul_rn(lo, c), __fmul_rn(hi, s));
}
__device__ __forceinline__ float rotate_hi(float lo, float hi, float c, float s) {
  return __fadd_rn(__fmul_rn(hi, c), __fmul_rn(lo, s));
}

}  // namespace nanovllm::kernels::cuda
