#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// In place on the q and k parts of the qkv projection:
//   1. when q_norm_weight/k_norm_weight are non-null (Qwen3): per-head RMSNorm over D;
//   2. rotary embedding, neox layout (pairs (i, i + D/2)), inv_freq[i] = theta^(-2i/D),
//      angle = position * inv_freq[i], computed in f32.
// q: [T, Hq, D] bf16, k: [T, Hkv, D] bf16 (views into qkv: token stride may exceed H*D)
// positions: [T] i32; q_norm_weight, k_norm_weight: [D] bf16 or data == nullptr.
namespace cpu {
void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                  const TensorView& k_norm_weight, const TensorView& positions, float eps,
                  float rope_theta);
}
namespace cuda {
void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                  const TensorView& k_norm_weight, const TensorView& positions, float eps,
                  float rope_theta, cudaStream_t stream);
}

inline void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                         const TensorView& k_norm_weight, const TensorView& positions, float eps,
                         float rope_theta, const ExecContext& ctx) {
  if (q.on_cpu())
    cpu::qk_norm_rope(q, k, q_norm_weight, k_norm_weight, positions, eps, rope_theta);
  else
    cuda::qk_norm_rope(q, k, q_norm_weight, k_norm_weight, positions, eps, rope_theta, ctx.stream);
}

}  // namespace nanovllm::kernels
