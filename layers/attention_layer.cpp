#include "layers/attention_layer.h"

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/phase_timer.h"
#include "kernels/rotary.h"
#include "layers/rope_frequencies.h"

namespace nanovllm {

namespace {

// Decode attention of one query per row: a decode step's rows, or a mixed prefill step's
// leading one-query sequences (AttentionMetadata::lead_rows), with their rows of the block
// table and their context lengths; the split-KV scratch is the step's.
void attend_one_query_rows(const TensorView& out, const TensorView& q, kernels::PagedKV kv,
                           const TensorView& block_tables, const TensorView& context_lens,
                           int max_context_len, float scale, const AttentionMetadata& meta,
                           const ExecContext& ctx) {
  kernels::DecodeAttentionParams p;
  p.out = out;
  p.q = q;
  p.kv = kv;
  p.kv.block_tables = block_tables;
  p.context_lens = context_lens;
  p.max_context_len = max_context_len;
  p.scale = scale;
  p.split_out = meta.split_out;
  p.split_lse = meta.split_lse;
  p.split_counters = meta.split_counters;
  kernels::decode_attention(p, ctx);
}

std::string layer_prefix(int layer) {
  return "model.layers." + std::to_string(layer) + ".self_attn";
}

}  // namespace

Qwen3Attention::Qwen3Attention(const ModelConfig& c, const Checkpoint& ckpt, int layer,
                               const ShardInfo& shard, Communicator& comm)
    : head_dim_(c.head_dim),
      eps_(c.rms_norm_eps),
      scale_(1.0f / std::sqrt(static_cast<float>(c.head_dim))),
      qkv_proj_(ckpt, layer_prefix(layer), c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                c.attention_bias, shard),
      o_proj_(ckpt, layer_prefix(layer) + ".o_proj", false, shard, comm) {
  const RopeTable rope = rope_table(c);
  rope_attention_scaling_ = rope.attention_scaling;
  const size_t rope_bytes = rope.inv_freq.size() * sizeof(float);
  rope_inv_freq_ = DeviceBuffer(rope_bytes, shard.device);
  rope_inv_freq_.copy_from_host(rope.inv_freq.data(), rope_bytes);
  if (c.qk_norm) {
    q_norm_ = Parameter::load_full(
        checkpoint_tensor(ckpt, layer_prefix(layer) + ".q_norm.weight", 1), shard.device);
    k_norm_ = Parameter::load_full(
        checkpoint_tensor(ckpt, layer_prefix(layer) + ".k_norm.weight", 1), shard.device);
  }
}

void Qwen3Attention::bind_kv_cache(const TensorView& k_cache, const TensorView& v_cache,
                                   const TensorView& k_scale, const TensorView& v_scale) {
  CHECK_EQ(k_cache.size(2), num_kv_heads());
  CHECK_EQ(k_cache.size(3), head_dim_);
  k_cache_ = k_cache;
  v_cache_ = v_cache;
  k_scale_ = k_scale;
  v_scale_ = v_scale;
}

TensorView Qwen3Attention::heads(const TensorView& qkv, int64_t first_head, int64_t num) const {
  // A view into qkv [T, (Hq + 2 Hkv) * D]: [T, num, D], token stride qkv_width().
  TensorView v(static_cast<uint16_t*>(qkv.data) + first_head * head_dim_, DType::kBf16,
               {qkv.size(0), num, head_dim_}, qkv.device);
  v.stride[0] = qkv.stride[0];
  return v;
}

void Qwen3Attention::project_qkv(const TensorView& x, const TensorView& positions,
                                 const TensorView& slot_mapping, const TensorView& qkv,
                                 const ExecContext& ctx) const {
  CHECK_MSG(k_cache_.data != nullptr, "KV cache not bound");
  kernels::QkvRopeStore r;
  r.num_heads = qkv_proj_.num_heads();
  r.num_kv_heads = qkv_proj_.num_kv_heads();
  r.q_norm_weight = q_norm_ ? q_norm_->view() : TensorView();
  r.k_norm_weight = k_norm_ ? k_norm_->view() : TensorView();
  r.positions = positions;
  r.eps = eps_;
  r.rope = {rope_inv_freq_.view(DType::kF32, {head_dim_ / 2}), rope_attention_scaling_};
  r.k_cache = k_cache_;
  r.v_cache = v_cache_;
  r.slot_mapping = slot_mapping;
  r.k_scale = k_scale_;
  r.v_scale = v_scale_;
  // Decode sizes on an H100/H200: the projection does the rest in its epilogue.
  if (!knocked_out(LayerOp::kQkvProj) && !knocked_out(LayerOp::kRope) &&
      qkv_proj_.forward_rope(qkv, x, r, ctx))
    return;
  if (!knocked_out(LayerOp::kQkvProj)) qkv_proj_.forward(qkv, x, ctx);
  if (knocked_out(LayerOp::kRope)) return;
  // Element-wise: the q/k norm + rotary and the KV store are one kernel on CUDA, so the store is
  // counted here rather than with attention.
  const PhaseScope phase(ctx, Phase::kElementwise);
  kernels::qk_norm_rope_store(q_heads(qkv), k_heads(qkv), v_heads(qkv), r.q_norm_weight,
                              r.k_norm_weight, r.positions, r.eps, r.rope, r.k_cache, r.v_cache,
                              r.slot_mapping, ctx, r.k_scale, r.v_scale);
}

void Qwen3Attention::attend_stored(const AttentionMetadata& meta, const TensorView& qkv,
                                   const TensorView& attn, const ExecContext& ctx) const {
  if (knocked_out(LayerOp::kAttention)) return;
  const int64_t t = qkv.size(0), hq = qkv_proj_.num_heads(), d = head_dim_;
  const TensorView q = q_heads(qkv);
  const PhaseScope phase(ctx, Phase::kAttention);
  const kernels::PagedKV kv{k_cache_, v_cache_, meta.block_tables, k_scale_, v_scale_};
  const TensorView o = attn.reshape({t, hq, d});
  if (meta.is_prefill) {
    // The leading one-query sequences (an fp8 cache's mixed steps, AttentionMetadata::
    // lead_rows): the decode kernel over their rows of q, out and the block table.
    const int64_t lead = meta.lead_rows, batch = meta.cu_seqlens_q.numel() - 1;
    if (lead > 0)
      attend_one_query_rows(o.slice_rows(0, lead), q.slice_rows(0, lead), kv,
                            meta.block_tables.slice_rows(0, lead), meta.lead_context_lens,
                            meta.lead_max_context_len, scale_, meta, ctx);
    if (lead < batch) {
      // The other sequences: their entries of cu_seqlens_q / _k and rows of the block table.
      kernels::PrefillAttentionParams p = prefill_params(meta, qkv, attn);
      p.kv.block_tables = meta.block_tables.slice_rows(lead, batch);
      p.cu_seqlens_q = meta.cu_seqlens_q.slice_rows(lead, batch + 1);
      p.cu_seqlens_k = meta.cu_seqlens_k.slice_rows(lead, batch + 1);
      kernels::prefill_attention(p, ctx);
    }
  } else {
    attend_one_query_rows(o, q, kv, meta.block_tables, meta.context_lens, meta.max_context_len,
                          scale_, meta, ctx);
  }
}

bool Qwen3Attention::prefill_takes_hopper() const {
  return k_cache_.data != nullptr && k_cache_.device == Device::kCuda &&
         k_cache_.dtype == DType::kBf16 &&
         kernels::cuda::prefill_attention_kernel(head_dim_, qkv_proj_.num_heads(), num_kv_heads(),
                                                 k_cache_.size(1)) ==
             kernels::cuda::PrefillKernel::kHopper;
}

int64_t Qwen3Attention::hopper_prefill_ctas(int64_t rows) const {
  return kernels::cuda::hopper_prefill_ctas(rows, qkv_proj_.num_heads(), num_kv_heads());
}

void Qwen3Attention::attend_stored_rows(const AttentionMetadata& meta, const TensorView& seqlens,
                                        int64_t row_begin, int64_t row_end, const TensorView& qkv,
                                        const TensorView& attn, const ExecContext& ctx) const {
  CHECK(meta.is_prefill && meta.lead_rows == 0);
  const int64_t n = seqlens.size(1);
  const PhaseScope phase(ctx, Phase::kAttention);
  kernels::PrefillAttentionParams p = prefill_params(meta, qkv, attn);
  p.cu_seqlens_q = seqlens.slice_rows(0, 1).reshape({n});
  p.cu_seqlens_k = seqlens.slice_rows(1, 2).reshape({n});
  p.max_seqlen_q = static_cast<int>(std::min<int64_t>(meta.max_seqlen_q, row_end - row_begin));
  kernels::prefill_attention(p, ctx);
}

kernels::PrefillAttentionParams Qwen3Attention::prefill_params(const AttentionMetadata& meta,
                                                               const TensorView& qkv,
                                                               const TensorView& attn) const {
  kernels::PrefillAttentionParams p;
  p.out = attn.reshape({qkv.size(0), qkv_proj_.num_heads(), head_dim_});
  p.q = q_heads(qkv);
  p.kv = kernels::PagedKV{k_cache_, v_cache_, meta.block_tables, k_scale_, v_scale_};
  p.cu_seqlens_q = meta.cu_seqlens_q;
  p.cu_seqlens_k = meta.cu_seqlens_k;
  p.max_seqlen_q = meta.max_seqlen_q;
  p.max_seqlen_k = meta.max_seqlen_k;
  p.scale = scale_;
  p.staging_k = meta.fp8_staging_k;
  p.staging_v = meta.fp8_staging_v;
  p.staging_tables = meta.fp8_staging_tables;
  p.kv_blocks = meta.kv_blocks;
  return p;
}

}  // namespace nanovllm
