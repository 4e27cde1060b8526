#pragma once

#include "kernels/exec_context.h"
#include "kernels/kv_cache.h"
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

// qk_norm_rope, then store_kvcache of the rotated k and of v (kernels/kv_cache.h): the
// attention layer's whole step between the qkv projection and attention. q and k change in
// place exactly as above (nothing reads k from qkv afterwards, but both backends agree on it);
// each token with slot_mapping[t] >= 0 also lands in k_cache/v_cache at that slot.
// v: [T, Hkv, D] bf16 (a view into qkv); k_cache, v_cache: [num_blocks, block_size, Hkv, D]
// bf16; slot_mapping: [T] i32, -1 stores nothing.
// CUDA: one kernel (a token's k heads go to the cache straight from registers; the separate
// store would read them back). CPU: the two reference kernels in turn.
namespace cuda {
void qk_norm_rope_store(const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& q_norm_weight, const TensorView& k_norm_weight,
                        const TensorView& positions, float eps, float rope_theta,
                        const TensorView& k_cache, const TensorView& v_cache,
                        const TensorView& slot_mapping, cudaStream_t stream);
}

inline void qk_norm_rope_store(const TensorView& q, const TensorView& k, const TensorView& v,
                               const TensorView& q_norm_weight, const TensorView& k_norm_weight,
                               const TensorView& positions, float eps, float rope_theta,
                               const TensorView& k_cache, const TensorView& v_cache,
                               const TensorView& slot_mapping, const ExecContext& ctx) {
  if (q.on_cpu()) {
    cpu::qk_norm_rope(q, k, q_norm_weight, k_norm_weight, positions, eps, rope_theta);
    cpu::store_kvcache(k, v, k_cache, v_cache, slot_mapping);
  } else {
    cuda::qk_norm_rope_store(q, k, v, q_norm_weight, k_norm_weight, positions, eps, rope_theta,
                             k_cache, v_cache, slot_mapping, ctx.stream);
  }
}

}  // namespace nanovllm::kernels
