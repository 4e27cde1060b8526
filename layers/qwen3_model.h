// The Qwen3 (and Qwen2) decoder, sharded for one tensor-parallel rank (nano-vllm's
// models/qwen3.py): embedding, layers of [input_layernorm, attention, post_attention_layernorm,
// MLP] with the residual carried by the fused add+norm, final norm, vocab-parallel LM head.
#pragma once

#include <memory>
#include <vector>

#include "kernels/device_buffer.h"
#include "layers/attention_layer.h"
#include "layers/prefill_overlap.h"
#include "layers/rms_norm_layer.h"
#include "layers/vocab_embedding.h"
#include "layers/workspace.h"

namespace nanovllm {

class Qwen3MLP {
 public:
  Qwen3MLP(const Checkpoint& ckpt, int layer, const ShardInfo& shard, Communicator& comm);
  // out, x: [T, H] bf16 (may alias); gate_up: [T, 2 * I_local], act: [T, I_local] scratch.
  void forward(const TensorView& out, const TensorView& x, const TensorView& gate_up,
               const TensorView& act, const ExecContext& ctx,
               RowOutput output = RowOutput::kReduced) const;
  // residual = hidden + residual, hidden = MLP(norm(residual)), in the fused MLP's one kernel
  // where it takes the size (kernels/fused_mlp.h: one token of a small shape on an H100/H200);
  // false, nothing done, elsewhere (the caller takes the norm and forward). hidden, residual:
  // [T, H] bf16; act: [T, I_local] scratch. With attn [T, Kq] and out_proj [H, Kq] given, hidden
  // is first attn @ out_proj^T in the same kernel (one GPU); false, nothing done, where the kernel
  // does not take that (the caller projects, then calls again without them).
  bool forward_add_norm(const TensorView& hidden, const TensorView& residual, const RMSNorm& norm,
                        const TensorView& act, const ExecContext& ctx, const TensorView& attn = {},
                        const TensorView& out_proj = {}) const;
  int64_t inter_local() const { return down_proj_.in_features(); }

 private:
  MergedColumnParallelLinear gate_up_proj_;
  RowParallelLinear down_proj_;
  DeviceBuffer fused_barrier_;  // [1] u64 on CUDA: the fused MLP's grid barrier counter
};

class Qwen3DecoderLayer {
 public:
  Qwen3DecoderLayer(const ModelConfig& config, const Checkpoint& ckpt, int layer,
                    const ShardInfo& shard, Communicator& comm);
  Qwen3Attention& self_attn() { return self_attn_; }
  const Qwen3Attention& self_attn() const { return self_attn_; }
  const Qwen3MLP& mlp() const { return mlp_; }
  const RMSNorm& input_layernorm() const { return input_layernorm_; }
  const RMSNorm& post_attention_layernorm() const { return post_attention_layernorm_; }

 private:
  RMSNorm input_layernorm_;
  Qwen3Attention self_attn_;
  RMSNorm post_attention_layernorm_;
  Qwen3MLP mlp_;
};

class Qwen3ForCausalLM {
 public:
  Qwen3ForCausalLM(const ModelConfig& config, const Checkpoint& ckpt, const ShardInfo& shard,
                   Communicator& comm);

  // kv_cache: [2, layers, num_blocks, block_size, kv_heads_local, head_dim] bf16, fp8 or int8;
  // kv_scales (fp8 and int8 only): [2, layers, num_blocks, kv_heads_local, block_size] i8, each
  // row's exponent (kernels/fp8.h) or scale code (kernels/int8_kv.h).
  void bind_kv_cache(const TensorView& kv_cache, const TensorView& kv_scales = {});
  int64_t num_kv_heads_local() const { return layers_.front()->self_attn().num_kv_heads(); }

  // The decoder over T tokens. input_ids, positions: [T] i32. Returns the final-normed
  // hidden states [T, H] bf16, a workspace view valid until the next call.
  TensorView forward(const TensorView& input_ids, const TensorView& positions,
                     const AttentionMetadata& meta, const ExecContext& ctx);

  // logits (rank 0; ignored elsewhere): [S, V] f32 for rows logits_indices [S] i32 of hidden;
  // logits_indices.data == nullptr: every row of hidden in order (S = T, no gather).
  // Every rank must call it (the shards are gathered to rank 0).
  void compute_logits(const TensorView& logits, const TensorView& hidden,
                      const TensorView& logits_indices, const ExecContext& ctx);
  // This rank's LM-head shard for the same rows, gathered nowhere (sampling from shards,
  // kernels/shard_sampler.h): [S, shard_rows] f32, column c = token vocab_start() + c, the
  // first vocab_columns() real; a workspace view valid until the next call. Every rank calls it.
  TensorView compute_shard_logits(const TensorView& hidden, const TensorView& logits_indices,
                                  const ExecContext& ctx);
  int64_t vocab_start() const { return lm_head_->vocab_start(); }
  int64_t vocab_columns() const { return lm_head_->vocab_columns(); }

  // CUDA decode: allocates the split-KV scratch now (its size depends on the GPU and the head
  // shape only, so it serves any batch) and zeroes its merge counters, so graphs captured
  // later never see those slots grow.
  void reserve_decode_scratch();
  // The longest context at which a decode step of `batch` rows merges its attention inside
  // clusters, 0 where it never does (kernels::cuda::decode_cluster_context_bound for this
  // rank's heads and scratch): the decode graphs' short-context twins.
  int decode_cluster_context_bound(int64_t batch) const;
  // CUDA with an fp8 cache (bind_kv_cache first): allocates bf16 staging for `blocks` cache
  // blocks and `table_entries` block-table entries, through which the Hopper prefill reads
  // the blocks of any prefill step that fits (AttentionMetadata::fp8_staging_k); larger steps
  // take the mma.sync kernel, which reads fp8 itself. A no-op otherwise.
  void reserve_fp8_prefill_staging(int64_t blocks, int64_t table_entries);
  // No workspace slot may grow from here on (CUDA graphs hold their addresses).
  void freeze_workspace() { workspace_.freeze(); }
  size_t workspace_bytes() const { return workspace_.nbytes(); }

 private:
  enum Slot : size_t {
    kResidual,
    kHidden,
    kQkv,
    kAttn,
    kGateUp,
    kAct,
    kSelected,
    kShardLogits,
    kGathered,
    kSplitOut,
    kSplitLse,
    kSplitCounters,
    kFp8StagingK,
    kFp8StagingV,
    kFp8StagingTables
  };
  // The LM head's input rows: hidden itself (no indices), else the gathered rows [S, H] bf16.
  TensorView select_rows(const TensorView& hidden, const TensorView& logits_indices,
                         const ExecContext& ctx);
  // compute_logits' workspace: the frozen one, or overflow_ for more rows than it sized.
  Workspace& logits_workspace(int64_t rows);
  // Rows of the CUDA decode kernel's split-KV scratch (kSplitOut [cells, G, D] f32, kSplitLse
  // [cells, G] f32, G = q heads per kv head of this rank): two per resident CTA slot of the
  // GPU, whatever the batch and the lengths (kernels::cuda::decode_attention_split_cells).
  int64_t decode_split_cells() const;
  // forward's layers and final norm for a prefill step under tensor parallelism on CUDA, the
  // row-parallel sums on overlap_'s second stream behind compute (layers/prefill_overlap.h).
  // cuts: PrefillOverlap::pieces of the step's rows. The buffers are forward's; hidden ends as
  // forward returns it.
  void run_layers_overlapped(const std::vector<int64_t>& cuts, const TensorView& hidden,
                             const TensorView& residual, const TensorView& positions,
                             const AttentionMetadata& m, const TensorView& qkv,
                             const TensorView& attn, const TensorView& gate_up,
                             const TensorView& act, const ExecContext& ctx);
  // A prefill step over an fp8 CUDA cache: the bf16 staging views in m when its kv_blocks and
  // block-table rows fit what reserve_fp8_prefill_staging reserved (else m keeps none).
  void attach_fp8_prefill_staging(AttentionMetadata& m);

  ModelConfig config_;
  ShardInfo shard_;
  Communicator* comm_;
  VocabParallelEmbedding embed_tokens_;
  std::vector<std::unique_ptr<Qwen3DecoderLayer>> layers_;
  RMSNorm norm_;
  std::unique_ptr<ParallelLMHead> lm_head_;
  Workspace workspace_;
  bool fp8_cuda_cache_ = false;  // bind_kv_cache's cache: fp8 on CUDA
  int64_t kv_block_size_ = 0;
  std::unique_ptr<PrefillOverlap> overlap_;  // made by the first step that takes it
  // compute_logits for more rows than the warm-up sized (a caller wanting every position's
  // logits) after the freeze: growable, never seen by a CUDA graph.
  Workspace overflow_;
};

}  // namespace nanovllm
