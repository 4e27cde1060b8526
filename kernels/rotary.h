#pragma once

#include "kernels/exec_context.h"
#include "kernels/kv_cache.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// The rotary embedding's frequencies: angle(p, i) = float(p) * inv_freq[i] (one f32 multiply,
// as transformers computes it), then cos/sin of that f32 angle (accurate sincosf, not __sinf:
// at 128k positions the angle is ~1e5 rad), both multiplied by attention_scaling (YaRN's
// mscale; 1 for plain RoPE). The table comes from layers/rope_frequencies.h (plain theta
// powers or YaRN's blend), so the kernels know nothing of the scaling scheme.
struct RopeFrequencies {
  TensorView inv_freq;  // [D / 2] f32, contiguous, on the op's device
  float attention_scaling = 1.0f;
};

// In place on the q and k parts of the qkv projection:
//   1. when q_norm_weight/k_norm_weight are non-null (Qwen3): per-head RMSNorm over D;
//   2. rotary embedding, neox layout: the pair (x[i], x[i + D/2]) rotated by angle(pos, i)
//      of `rope` (above), cos and sin scaled by rope.attention_scaling.
// q: [T, Hq, D] bf16, k: [T, Hkv, D] bf16 (views into qkv: token stride may exceed H*D)
// positions: [T] i32; q_norm_weight, k_norm_weight: [D] bf16 or data == nullptr.
namespace cpu {
void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                  const TensorView& k_norm_weight, const TensorView& positions, float eps,
                  const RopeFrequencies& rope);
}
namespace cuda {
void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                  const TensorView& k_norm_weight, const TensorView& positions, float eps,
                  const RopeFrequencies& rope, cudaStream_t stream);
}

inline void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                         const TensorView& k_norm_weight, const TensorView& positions, float eps,
                         const RopeFrequencies& rope, const ExecContext& ctx) {
  if (q.on_cpu())
    cpu::qk_norm_rope(q, k, q_norm_weight, k_norm_weight, positions, eps, rope);
  else
    cuda::qk_norm_rope(q, k, q_norm_weight, k_norm_weight, positions, eps, rope, ctx.stream);
}

// qk_norm_rope, then store_kvcache of the rotated k and of v (kernels/kv_cache.h): the
// attention layer's whole step between the qkv projection and attention. q and k change in
// place exactly as above (nothing reads k from qkv afterwards, but both backends agree on it);
// each token with slot_mapping[t] >= 0 also lands in k_cache/v_cache at that slot.
// v: [T, Hkv, D] bf16 (a view into qkv); k_cache, v_cache: [num_blocks, block_size, Hkv, D]
// bf16, or fp8 e4m3 / int8 with k_scale, v_scale [num_blocks, Hkv, block_size] i8
// (kernels/kv_cache.h);
// slot_mapping: [T] i32, -1 stores nothing.
// CUDA: one kernel (a token's k heads go to the cache straight from registers; the separate
// store would read them back). CPU: the two reference kernels in turn.
namespace cuda {
void qk_norm_rope_store(const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& q_norm_weight, const TensorView& k_norm_weight,
                        const TensorView& positions, float eps, const RopeFrequencies& rope,
                        const TensorView& k_cache, const TensorView& v_cache,
                        const TensorView& slot_mapping, cudaStream_t stream,
                        const TensorView& k_scale = {}, const TensorView& v_scale = {});
}

inline void qk_norm_rope_store(const TensorView& q, const TensorView& k, const TensorView& v,
                               const TensorView& q_norm_weight, const TensorView& k_norm_weight,
                               const TensorView& positions, float eps, const RopeFrequencies& rope,
                               const TensorView& k_cache, const TensorView& v_cache,
                               const TensorView& slot_mapping, const ExecContext& ctx,
                               const TensorView& k_scale = {}, const TensorView& v_scale = {}) {
  if (q.on_cpu()) {
    cpu::qk_norm_rope(q, k, q_norm_weight, k_norm_weight, positions, eps, rope);
    cpu::store_kvcache(k, v, k_cache, v_cache, slot_mapping, k_scale, v_scale);
  } else {
    cuda::qk_norm_rope_store(q, k, v, q_norm_weight, k_norm_weight, positions, eps, rope, k_cache,
                             v_cache, slot_mapping, ctx.stream, k_scale, v_scale);
  }
}

// qk_norm_rope_store's work past q, k and v, for a qkv projection that does it in its epilogue
// (kernels::linear_qkv_rope_store): the heads of this rank and the same arguments.
struct QkvRopeStore {
  int64_t num_heads = 0, num_kv_heads = 0;
  TensorView q_norm_weight, k_norm_weight;  // [D] bf16 or data == nullptr
  TensorView positions;                     // [T] i32
  float eps = 0.f;
  RopeFrequencies rope;
  TensorView k_cache, v_cache;  // [num_blocks, block_size, Hkv, D]
  TensorView slot_mapping;      // [T] i32, -1 stores nothing
  TensorView k_scale, v_scale;  // 8-bit caches only
};

}  // namespace nanovllm::kernels
