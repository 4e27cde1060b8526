// The CUDA prefill attention kernels behind kernels::cuda::prefill_attention, for its dispatch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/attention.h"

namespace nanovllm::kernels::cuda {

// mma.sync (FlashAttention-2 style), any sm_80+ GPU, head dims 64 and 128.
void prefill_attention_mma(const PrefillAttentionParams& p, cudaStream_t stream);

// TMA + wgmma, warp-specialised (prefill_attention_hopper.cu); throws on what it does not serve.
void prefill_attention_hopper(const PrefillAttentionParams& p, cudaStream_t stream);
// The shapes it serves: head dim 128, Hq / Hkv <= 16, block_size % 16 == 0.
bool hopper_prefill_shape_ok(int64_t head_dim, int64_t hq, int64_t hkv, int64_t block_size);

// fp8 cache: dequantizes the tokens p reads (each sequence's first k_len) into bf16 staging
// blocks p.staging_k / staging_v (compactly, in sequence order; the caller has checked that
// p.kv_blocks fit; a last block's tail past k_len keeps whatever it held) and fills
// p.staging_tables; returns the bf16 PagedKV over them (fp8_staging.cu).
PagedKV stage_fp8_blocks(const PrefillAttentionParams& p, cudaStream_t stream);

}  // namespace nanovllm::kernels::cuda
