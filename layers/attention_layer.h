// Qwen3Attention (also Qwen2's: bias on q/k/v, no q/k norm): qkv projection, per-head q/k
// RMSNorm + rotary, KV store into the paged cache, paged prefill/decode attention, o_proj.
#pragma once

#include <optional>

#include "kernels/attention.h"
#include "kernels/device_buffer.h"
#include "layers/attention_metadata.h"
#include "layers/knock_out.h"
#include "layers/linear.h"
#include "layers/model_config.h"

namespace nanovllm {

class Qwen3Attention {
 public:
  Qwen3Attention(const ModelConfig& config, const Checkpoint& ckpt, int layer,
                 const ShardInfo& shard, Communicator& comm);

  // This layer's slice of the KV cache: [num_blocks, block_size, kv_heads_local, head_dim]; an
  // fp8 cache's row exponents [num_blocks, kv_heads_local, block_size] i8 beside it.
  void bind_kv_cache(const TensorView& k_cache, const TensorView& v_cache,
                     const TensorView& k_scale = {}, const TensorView& v_scale = {});

  // The layer in parts (the decoder runs attend then project_out, or hands o_proj to the fused
  // MLP; layers/prefill_overlap.h projects rows apart): project_qkv maps rows of x [R, H] to rows
  // of qkv [R, qkv_width()] bf16 scratch, normalises and rotates q and k and stores k and v in the
  // cache (positions, slot_mapping: those rows' [R] i32); attend_stored then attends every row of
  // qkv, leaving the output in attn [T, q_width()] bf16 scratch; attend is the two over every
  // row; project_out maps rows of attn: out [R, H] from attn [R, q_width()].
  void project_qkv(const TensorView& x, const TensorView& positions, const TensorView& slot_mapping,
                   const TensorView& qkv, const ExecContext& ctx) const;
  void attend_stored(const AttentionMetadata& meta, const TensorView& qkv, const TensorView& attn,
                     const ExecContext& ctx) const;
  // attend_stored of a prefill step (no lead rows, a bf16 cache) for its rows [row_begin,
  // row_end) only, once their K/V and every earlier row's are stored: seqlens [2, B + 1] i32 is
  // the piece's cu_seqlens_q and _k (kernels/prefill_rows.h); qkv and attn stay whole.
  void attend_stored_rows(const AttentionMetadata& meta, const TensorView& seqlens,
                          int64_t row_begin, int64_t row_end, const TensorView& qkv,
                          const TensorView& attn, const ExecContext& ctx) const;
  void attend(const TensorView& x, const TensorView& positions, const AttentionMetadata& meta,
              const TensorView& qkv, const TensorView& attn, const ExecContext& ctx) const {
    project_qkv(x, positions, meta.slot_mapping, qkv, ctx);
    attend_stored(meta, qkv, attn, ctx);
  }
  void project_out(const TensorView& out, const TensorView& attn, const ExecContext& ctx,
                   RowOutput output) const {
    if (!knocked_out(LayerOp::kOProj)) o_proj_.forward(out, attn, ctx, output);
  }
  // o_proj's weight [H, q_width()] for a caller that takes the projection into a later kernel
  // (the fused MLP at one token on one GPU); empty where o_proj has a bias or is knocked out.
  TensorView out_proj_weight() const {
    return o_proj_.has_bias() || knocked_out(LayerOp::kOProj) ? TensorView() : o_proj_.weight();
  }

  // Whether prefill steps' attention takes the Hopper kernel (kernels/attention.h), and its CTAs
  // over one sequence of `rows` queries.
  bool prefill_takes_hopper() const;
  int64_t hopper_prefill_ctas(int64_t rows) const;
  int64_t q_width() const { return qkv_proj_.num_heads() * head_dim_; }
  int64_t qkv_width() const { return qkv_proj_.out_features(); }
  int64_t num_kv_heads() const { return qkv_proj_.num_kv_heads(); }

 private:
  // A prefill launch over every row of qkv / attn (q and out whole; cu_seqlens_q absolute rows)
  // with the step's sequences, block table and fp8 staging; callers narrow the sequences.
  kernels::PrefillAttentionParams prefill_params(const AttentionMetadata& meta,
                                                 const TensorView& qkv,
                                                 const TensorView& attn) const;
  // q, k, v of qkv [T, qkv_width()]: [T, heads, D] views, token stride qkv_width().
  TensorView heads(const TensorView& qkv, int64_t first_head, int64_t num) const;
  TensorView q_heads(const TensorView& qkv) const { return heads(qkv, 0, qkv_proj_.num_heads()); }
  TensorView k_heads(const TensorView& qkv) const {
    return heads(qkv, qkv_proj_.num_heads(), num_kv_heads());
  }
  TensorView v_heads(const TensorView& qkv) const {
    return heads(qkv, qkv_proj_.num_heads() + num_kv_heads(), num_kv_heads());
  }

  int64_t head_dim_;
  float eps_, scale_;
  // The rotary frequencies (layers/rope_frequencies.h) on this layer's device: [D/2] f32.
  // Each layer holds its own 256-byte copy; sharing one would only save bytes.
  DeviceBuffer rope_inv_freq_;
  float rope_attention_scaling_ = 1.0f;
  QKVParallelLinear qkv_proj_;
  RowParallelLinear o_proj_;
  std::optional<Parameter> q_norm_, k_norm_;  // [D] bf16 (Qwen3)
  TensorView k_cache_, v_cache_;
  TensorView k_scale_, v_scale_;  // fp8 cache only
};

}  // namespace nanovllm
