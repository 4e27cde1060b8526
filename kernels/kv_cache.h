#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// Whether a cache of this element keeps a scale byte beside each row (fp8's exponent,
// int8's scale code): [num_blocks, Hkv, block_size] i8 per layer and K / V.
inline bool kv_cache_has_row_scales(DType t) {
  return t == DType::kFp8E4M3 || t == DType::kI8;
}

// Writes each token's K and V into its cache slot: slot = block_id * block_size + offset.
// k, v:         [T, Hkv, D] bf16 (views into qkv)
// k_cache, v_cache: [num_blocks, block_size, Hkv, D] bf16, fp8 e4m3 (kernels/fp8.h: each
//               row scaled by its power of two, rounded to nearest, saturating) or int8
//               (kernels/int8_kv.h) (one layer's slice). On CUDA the fused qk_norm_rope_store
//               (kernels/rotary.h) stores the 8-bit caches.
// k_scale, v_scale: fp8 and int8 only, [num_blocks, Hkv, block_size] i8: each row's exponent
//               or scale code
// slot_mapping: [T] i32; -1 stores nothing (padding, warm-up).
namespace cpu {
void store_kvcache(const TensorView& k, const TensorView& v, const TensorView& k_cache,
                   const TensorView& v_cache, const TensorView& slot_mapping,
                   const TensorView& k_scale = {}, const TensorView& v_scale = {});
}
namespace cuda {
void store_kvcache(const TensorView& k, const TensorView& v, const TensorView& k_cache,
                   const TensorView& v_cache, const TensorView& slot_mapping, cudaStream_t stream);
}

inline void store_kvcache(const TensorView& k, const TensorView& v, const TensorView& k_cache,
                          const TensorView& v_cache, const TensorView& slot_mapping,
                          const ExecContext& ctx) {
  if (k.on_cpu())
    cpu::store_kvcache(k, v, k_cache, v_cache, slot_mapping);
  else
    cuda::store_kvcache(k, v, k_cache, v_cache, slot_mapping, ctx.stream);
}

}  // namespace nanovllm::kernels
