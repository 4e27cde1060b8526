#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// The paged KV cache of one layer. Token t of sequence b lives in
//   block block_tables[b][t / block_size], row t % block_size.
struct PagedKV {
  TensorView k_cache;       // [num_blocks, block_size, Hkv, D] bf16
  TensorView v_cache;       // [num_blocks, block_size, Hkv, D] bf16
  TensorView block_tables;  // [B, max_blocks_per_seq] i32, unused entries -1
};

// Variable-length prefill over the paged cache (the new tokens' K/V are already stored):
// sequence b has q_len = cu_seqlens_q[b+1] - cu_seqlens_q[b] new queries and
// k_len = cu_seqlens_k[b+1] - cu_seqlens_k[b] keys (cached prefix + new tokens); query i sits
// at position k_len - q_len + i and attends causally to keys [0, k_len - q_len + i].
// GQA: query head h reads kv head h / (Hq / Hkv). Softmax in f32.
struct PrefillAttentionParams {
  TensorView out;  // [Tq, Hq, D] bf16
  TensorView q;    // [Tq, Hq, D] bf16 (token stride may exceed Hq*D)
  PagedKV kv;
  TensorView cu_seqlens_q;  // [B + 1] i32
  TensorView cu_seqlens_k;  // [B + 1] i32
  int max_seqlen_q = 0;
  int max_seqlen_k = 0;
  float scale = 1.0f;  // usually 1/sqrt(D)
};

// One new query per sequence, attending to its first context_lens[b] cached tokens
// (the current token's K/V included, already stored).
struct DecodeAttentionParams {
  TensorView out;  // [B, Hq, D] bf16
  TensorView q;    // [B, Hq, D] bf16 (token stride may exceed Hq*D)
  PagedKV kv;
  TensorView context_lens;  // [B] i32
  int max_context_len = 0;  // upper bound over the batch (sizes the split-KV work)
  float scale = 1.0f;
  // Flash-decoding scratch (CUDA only; null lets the launcher pick no split):
  TensorView split_out;  // [B, Hq, max_splits, D] f32
  TensorView split_lse;  // [B, Hq, max_splits] f32
};

namespace cpu {
void prefill_attention(const PrefillAttentionParams& p);
void decode_attention(const DecodeAttentionParams& p);
}  // namespace cpu
namespace cuda {
void prefill_attention(const PrefillAttentionParams& p, cudaStream_t stream);
void decode_attention(const DecodeAttentionParams& p, cudaStream_t stream);
}  // namespace cuda

inline void prefill_attention(const PrefillAttentionParams& p, const ExecContext& ctx) {
  if (p.q.on_cpu())
    cpu::prefill_attention(p);
  else
    cuda::prefill_attention(p, ctx.stream);
}
inline void decode_attention(const DecodeAttentionParams& p, const ExecContext& ctx) {
  if (p.q.on_cpu())
    cpu::decode_attention(p);
  else
    cuda::decode_attention(p, ctx.stream);
}

}  // namespace nanovllm::kernels
