// silu(gate) * up in f32 (the exact exp and divide), shared by the activation kernel and the
// skinny GEMM's gate_up epilogue so that both round the same value to bf16.
#pragma once

namespace nanovllm::kernels::cuda {

__device__ __forceinline__ float silu_mul_exact(float g, float u) {
  return g / (1.f + expf(-g)) * u;
}

}  // namespace nanovllm::kernels::cuda
