// What attention needs to know about the step beyond the hidden states (nano-vllm's
// Context): where each new token's K/V goes, and how the sequences and their blocks are laid
// out. Device tensors, filled by the model runner from the StepCommand.
#pragma once

#include "kernels/tensor.h"

namespace nanovllm {

struct AttentionMetadata {
  bool is_prefill = true;
  TensorView slot_mapping;  // [T] i32, -1 = do not store
  TensorView block_tables;  // [B, W] i32, -1 padded
  // Prefill:
  TensorView cu_seqlens_q;  // [B + 1] i32
  TensorView cu_seqlens_k;  // [B + 1] i32
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  // fp8 cache only (0 otherwise): Σ_b ceil(k_len_b / block_size), the cache blocks the
  // prefill kernels read (whether the Hopper kernel's bf16 staging can take them).
  int64_t kv_blocks = 0;
  // Prefill over an fp8 cache: the first lead_rows sequences (one query each: a mixed step's
  // decodes, rank/prefill_attention_split.h) go through the decode kernel with these context
  // lengths; max_seqlen_q / _k and kv_blocks then describe the other sequences only, which
  // the prefill kernels take. 0: the prefill kernels take the whole step.
  int lead_rows = 0;
  TensorView lead_context_lens;  // [lead_rows] i32
  int lead_max_context_len = 0;
  // Prefill on CUDA with an fp8 cache: bf16 staging for the Hopper kernel (kernels/attention.h,
  // PrefillAttentionParams), filled by Qwen3ForCausalLM where kv_blocks fit; else null.
  TensorView fp8_staging_k, fp8_staging_v;  // [staging_blocks, block_size, Hkv, D] bf16
  TensorView fp8_staging_tables;            // [B, W] i32
  // Decode:
  TensorView context_lens;  // [B] i32
  int max_context_len = 0;
  // Decode (and a prefill's lead rows) on CUDA: split-KV scratch (null: one CTA per sequence and kv
  // head), filled by Qwen3ForCausalLM; cells = kernels::cuda::decode_attention_split_cells(), G =
  // Hq / Hkv.
  TensorView split_out;       // [cells, G, D] f32
  TensorView split_lse;       // [cells, G] f32
  TensorView split_counters;  // [cells / 2] i32, zero between calls (null: a merge kernel)
};

}  // namespace nanovllm
