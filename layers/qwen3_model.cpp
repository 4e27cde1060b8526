#include "layers/qwen3_model.h"

#include <algorithm>

#include "kernels/attention.h"
#include "kernels/embedding.h"
#include "kernels/fused_mlp.h"
#include "kernels/kv_cache.h"
#include "kernels/phase_timer.h"
#include "kernels/prefill_rows.h"
#include "layers/knock_out.h"

namespace nanovllm {

namespace {
std::string mlp_prefix(int layer) {
  return "model.layers." + std::to_string(layer) + ".mlp.";
}
std::string layer_name(int layer, const char* what) {
  return "model.layers." + std::to_string(layer) + "." + what;
}
}  // namespace

Qwen3MLP::Qwen3MLP(const Checkpoint& ckpt, int layer, const ShardInfo& shard, Communicator& comm)
    : gate_up_proj_(ckpt, {mlp_prefix(layer) + "gate_proj", mlp_prefix(layer) + "up_proj"}, false,
                    shard),
      down_proj_(ckpt, mlp_prefix(layer) + "down_proj", false, shard, comm) {
  if (shard.device == Device::kCuda) {
    fused_barrier_ = DeviceBuffer(sizeof(uint64_t), Device::kCuda);
    fused_barrier_.zero();
  }
}

void Qwen3MLP::forward(const TensorView& out, const TensorView& x, const TensorView& gate_up,
                       const TensorView& act, const ExecContext& ctx, RowOutput output) const {
  const bool down = !knocked_out(LayerOp::kDown);
  // Knock-outs (layers/knock_out.h): without gate_up, down runs on act as at decode sizes.
  if (knocked_out(LayerOp::kGateUp)) {
    if (down) down_proj_.forward(out, act, ctx, output);
    return;
  }
  // One token of a shape the fused MLP takes (kernels/fused_mlp.h: the 0.6B, small shards, the
  // 8B's at --tp 4 and 8): the whole MLP in one kernel.
  if (down && !fused_barrier_.empty()) {
    bool fused = false;
    {
      const PhaseScope phase(ctx, Phase::kGemm);
      fused = kernels::fused_mlp(out, x, gate_up_proj_.weight(), down_proj_.weight(), act,
                                 static_cast<uint64_t*>(fused_barrier_.data()), nullptr, ctx);
    }
    if (fused) {
      down_proj_.reduce(out, ctx, output);
      return;
    }
  }
  // Decode sizes: the activation in the gate_up GEMM's epilogue, then the plain down projection.
  if (gate_up_proj_.forward_act(act, x, ctx)) {
    if (down) down_proj_.forward(out, act, ctx, output);
    return;
  }
  gate_up_proj_.forward(gate_up, x, ctx);
  if (down) down_proj_.forward_silu_mul(out, gate_up, act, ctx, output);
}

bool Qwen3MLP::forward_add_norm(const TensorView& hidden, const TensorView& residual,
                                const RMSNorm& norm, const TensorView& act, const ExecContext& ctx,
                                const TensorView& attn, const TensorView& out_proj) const {
  if (fused_barrier_.empty() || knocked_out(LayerOp::kGateUp) || knocked_out(LayerOp::kDown))
    return false;
  const PhaseScope phase(ctx, Phase::kGemm);
  const kernels::FusedMlpNorm post_norm{residual, norm.weight(), norm.eps(), attn, out_proj};
  return kernels::fused_mlp(hidden, hidden, gate_up_proj_.weight(), down_proj_.weight(), act,
                            static_cast<uint64_t*>(fused_barrier_.data()), &post_norm, ctx);
}

Qwen3DecoderLayer::Qwen3DecoderLayer(const ModelConfig& c, const Checkpoint& ckpt, int layer,
                                     const ShardInfo& shard, Communicator& comm)
    : input_layernorm_(ckpt, layer_name(layer, "input_layernorm.weight"), c.rms_norm_eps,
                       shard.device),
      self_attn_(c, ckpt, layer, shard, comm),
      post_attention_layernorm_(ckpt, layer_name(layer, "post_attention_layernorm.weight"),
                                c.rms_norm_eps, shard.device),
      mlp_(ckpt, layer, shard, comm) {}

Qwen3ForCausalLM::Qwen3ForCausalLM(const ModelConfig& c, const Checkpoint& ckpt,
                                   const ShardInfo& shard, Communicator& comm)
    : config_(c),
      shard_(shard),
      comm_(&comm),
      embed_tokens_(ckpt, "model.embed_tokens.weight", c.vocab_size, shard, comm),
      norm_(ckpt, "model.norm.weight", c.rms_norm_eps, shard.device),
      workspace_(shard.device),
      overflow_(shard.device) {
  CHECK_EQ(comm.world_size(), shard.tp_size);
  CHECK_EQ(comm.rank(), shard.tp_rank);
  for (int i = 0; i < c.num_hidden_layers; ++i)
    layers_.push_back(std::make_unique<Qwen3DecoderLayer>(c, ckpt, i, shard, comm));
  lm_head_ = c.tie_word_embeddings ? std::make_unique<ParallelLMHead>(embed_tokens_, comm)
                                   : std::make_unique<ParallelLMHead>(ckpt, "lm_head.weight",
                                                                      c.vocab_size, shard, comm);
}

void Qwen3ForCausalLM::bind_kv_cache(const TensorView& kv_cache, const TensorView& kv_scales) {
  CHECK_EQ(kv_cache.ndim, 6);
  CHECK_EQ(kv_cache.size(0), 2);
  CHECK_EQ(kv_cache.size(1), static_cast<int64_t>(layers_.size()));
  const int64_t nb = kv_cache.size(2), bs = kv_cache.size(3), hkv = kv_cache.size(4),
                d = kv_cache.size(5);
  fp8_cuda_cache_ =
      kernels::kv_cache_has_row_scales(kv_cache.dtype) && kv_cache.device == Device::kCuda;
  kv_block_size_ = bs;
  // Bytes, not elements: the cache is bf16 or fp8 (--kv-cache-dtype).
  const int64_t layer_bytes = nb * bs * hkv * d * static_cast<int64_t>(dtype_size(kv_cache.dtype));
  auto* base = static_cast<char*>(kv_cache.data);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const TensorView k(base + static_cast<int64_t>(i) * layer_bytes, kv_cache.dtype,
                       {nb, bs, hkv, d}, kv_cache.device);
    const TensorView v(base + static_cast<int64_t>(layers_.size() + i) * layer_bytes,
                       kv_cache.dtype, {nb, bs, hkv, d}, kv_cache.device);
    TensorView k_scale, v_scale;
    if (kernels::kv_cache_has_row_scales(kv_cache.dtype)) {
      CHECK(kv_scales.dtype == DType::kI8 && kv_scales.ndim == 5);
      auto* scales = static_cast<int8_t*>(kv_scales.data);
      const int64_t layer_rows = nb * bs * hkv;
      k_scale = TensorView(scales + static_cast<int64_t>(i) * layer_rows, DType::kI8, {nb, hkv, bs},
                           kv_cache.device);
      v_scale = TensorView(scales + static_cast<int64_t>(layers_.size() + i) * layer_rows,
                           DType::kI8, {nb, hkv, bs}, kv_cache.device);
    }
    layers_[i]->self_attn().bind_kv_cache(k, v, k_scale, v_scale);
  }
}

TensorView Qwen3ForCausalLM::forward(const TensorView& input_ids, const TensorView& positions,
                                     const AttentionMetadata& meta, const ExecContext& ctx) {
  const int64_t t = input_ids.size(0), h = config_.hidden_size;
  const Qwen3Attention& attn0 = layers_.front()->self_attn();
  const int64_t inter = layers_.front()->mlp().inter_local();
  const TensorView residual = workspace_.get(kResidual, DType::kBf16, {t, h});
  const TensorView hidden = workspace_.get(kHidden, DType::kBf16, {t, h});
  const TensorView qkv = workspace_.get(kQkv, DType::kBf16, {t, attn0.qkv_width()});
  const TensorView attn = workspace_.get(kAttn, DType::kBf16, {t, attn0.q_width()});
  const TensorView gate_up = workspace_.get(kGateUp, DType::kBf16, {t, 2 * inter});
  const TensorView act = workspace_.get(kAct, DType::kBf16, {t, inter});

  AttentionMetadata m = meta;
  if ((!m.is_prefill || m.lead_rows > 0) && !input_ids.on_cpu()) {
    const int64_t cells = decode_split_cells();
    const int64_t g = attn0.q_width() / config_.head_dim / attn0.num_kv_heads();
    m.split_out = workspace_.get(kSplitOut, DType::kF32, {cells, g, config_.head_dim});
    m.split_lse = workspace_.get(kSplitLse, DType::kF32, {cells, g});
    // Counters only once reserve_decode_scratch zeroed them; else the kernel merges in a
    // second launch.
    if (workspace_.slot_bytes(kSplitCounters) > 0)
      m.split_counters = workspace_.get(kSplitCounters, DType::kI32, {cells / 2});
  }
  if (m.is_prefill) attach_fp8_prefill_staging(m);

  // The residual stream starts as the embedding; each norm adds the previous block's output.
  embed_tokens_.forward(residual, input_ids, ctx);
  // Under tensor parallelism each row-parallel output is summed by the norm after it, with its
  // residual add (one kernel where the communicator has one).
  const RowOutput rows = comm_->world_size() > 1 ? RowOutput::kPartial : RowOutput::kReduced;
  const auto add_norm = [&](const RMSNorm& norm) {
    if (rows == RowOutput::kPartial)
      norm.forward_add_reduced(hidden, residual, *comm_, ctx);
    else
      norm.forward_add(hidden, residual, ctx);
  };
  // Every rank must take the same path (the sums are collectives), so nothing rank-local decides
  // it: a profiled step's phase timer lives on rank 0 only (the sums on the second stream are
  // then left out of its phases).
  if (rows == RowOutput::kPartial && m.is_prefill && !input_ids.on_cpu() &&
      PrefillOverlap::allowed()) {
    const std::vector<int64_t> cuts = PrefillOverlap::pieces(t, h, comm_->copy_engine_sum_bytes());
    if (!cuts.empty()) {
      run_layers_overlapped(cuts, hidden, residual, positions, m, qkv, attn, gate_up, act, ctx);
      return hidden;
    }
  }
  const bool norms = !knocked_out(LayerOp::kNorm);  // a timing experiment (layers/knock_out.h)
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Qwen3DecoderLayer& layer = *layers_[i];
    if (norms) {
      if (i == 0)
        layer.input_layernorm().forward(hidden, residual, ctx);
      else
        add_norm(layer.input_layernorm());
    }
    const Qwen3Attention& self_attn = layer.self_attn();
    self_attn.attend(hidden, positions, m, qkv, attn, ctx);
    // One token on one GPU: the output projection and the post-attention norm inside the fused
    // MLP's kernel where it takes them, else the norm alone.
    if (norms && rows == RowOutput::kReduced) {
      const RMSNorm& post_norm = layer.post_attention_layernorm();
      const TensorView w_out = self_attn.out_proj_weight();
      if (w_out.data != nullptr &&
          layer.mlp().forward_add_norm(hidden, residual, post_norm, act, ctx, attn, w_out))
        continue;
      self_attn.project_out(hidden, attn, ctx, rows);
      if (layer.mlp().forward_add_norm(hidden, residual, post_norm, act, ctx)) continue;
    } else {
      self_attn.project_out(hidden, attn, ctx, rows);
    }
    if (norms) add_norm(layer.post_attention_layernorm());
    layer.mlp().forward(hidden, hidden, gate_up, act, ctx, rows);
  }
  add_norm(norm_);
  return hidden;
}

void Qwen3ForCausalLM::run_layers_overlapped(const std::vector<int64_t>& cuts,
                                             const TensorView& hidden, const TensorView& residual,
                                             const TensorView& positions,
                                             const AttentionMetadata& m, const TensorView& qkv,
                                             const TensorView& attn, const TensorView& gate_up,
                                             const TensorView& act, const ExecContext& ctx) {
  if (!overlap_) overlap_ = std::make_unique<PrefillOverlap>();
  PrefillOverlap& o = *overlap_;
  const ExecContext comm_ctx = o.comm_context(ctx);
  const int n = static_cast<int>(cuts.size()) - 1;
  const auto piece = [&](const TensorView& v, int p) { return v.slice_rows(cuts[p], cuts[p + 1]); };
  // Piece p's partial rows of hidden, summed over the ranks, added to the residual and normed
  // by `norm` on the sums' stream, once the compute stream has made them.
  const auto sum_piece = [&](const RMSNorm& norm, int p) {
    o.comm_waits_for_compute(ctx);
    norm.forward_add_reduced_by_copy_engines(piece(hidden, p), piece(residual, p), *comm_,
                                             comm_ctx);
    o.mark_summed(p);
  };
  // Attention piece by piece too where the prefill kernels take every row (no lead rows, a bf16
  // cache): piece p's queries see only keys up to its own last row, stored by then, so its
  // attention and output projection need not wait for the later pieces' qkv -- and so neither
  // for the previous layer's last MLP sum, which would otherwise stand exposed before every
  // layer's attention (where that pays: PrefillOverlap::attention_by_piece). Each piece's
  // cu_seqlens are cut on the device from the step's.
  const Qwen3Attention& attn0 = layers_.front()->self_attn();
  const bool rows_apart =
      m.lead_rows == 0 && !fp8_cuda_cache_ &&
      PrefillOverlap::attention_by_piece(comm_->world_size(), attn0.prefill_takes_hopper(),
                                         attn0.hopper_prefill_ctas(cuts[1] - cuts[0]),
                                         kernels::cuda::multiprocessor_count());
  TensorView seqlens;  // [n, 2, B + 1]: piece p's cu_seqlens_q and _k
  const auto piece_seqlens = [&](int p) {
    return seqlens.slice_rows(p, p + 1).reshape({2, seqlens.size(2)});
  };
  if (rows_apart) {
    seqlens = o.piece_seqlens(n, m.cu_seqlens_q.numel());
    for (int p = 0; p < n; ++p)
      kernels::cuda::clip_seqlens_to_rows(m.cu_seqlens_q, m.cu_seqlens_k,
                                          static_cast<int32_t>(cuts[p]),
                                          static_cast<int32_t>(cuts[p + 1]), piece_seqlens(p), ctx);
  }
  layers_.front()->input_layernorm().forward(hidden, residual, ctx);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Qwen3DecoderLayer& layer = *layers_[i];
    const RMSNorm& next = i + 1 < layers_.size() ? layers_[i + 1]->input_layernorm() : norm_;
    if (rows_apart) {
      for (int p = 0; p < n; ++p) {  // piece p's sum runs under piece p + 1's work
        if (i > 0) o.compute_waits_for(p, ctx);
        layer.self_attn().project_qkv(piece(hidden, p), piece(positions, p),
                                      piece(m.slot_mapping, p), piece(qkv, p), ctx);
        layer.self_attn().attend_stored_rows(m, piece_seqlens(p), cuts[p], cuts[p + 1], qkv, attn,
                                             ctx);
        layer.self_attn().project_out(piece(hidden, p), piece(attn, p), ctx, RowOutput::kPartial);
        sum_piece(layer.post_attention_layernorm(), p);
      }
    } else {
      if (i == 0) {
        layer.self_attn().project_qkv(hidden, positions, m.slot_mapping, qkv, ctx);
      } else {
        for (int p = 0; p < n; ++p) {  // the last MLP piece's sum under the first qkv projection
          o.compute_waits_for(p, ctx);
          layer.self_attn().project_qkv(piece(hidden, p), piece(positions, p),
                                        piece(m.slot_mapping, p), piece(qkv, p), ctx);
        }
      }
      layer.self_attn().attend_stored(m, qkv, attn, ctx);
      for (int p = 0; p < n; ++p) {  // piece p's sum runs under piece p + 1's projection
        layer.self_attn().project_out(piece(hidden, p), piece(attn, p), ctx, RowOutput::kPartial);
        sum_piece(layer.post_attention_layernorm(), p);
      }
    }
    for (int p = 0; p < n; ++p) {  // the last projection's sum under the first MLP, and so on
      o.compute_waits_for(p, ctx);
      layer.mlp().forward(piece(hidden, p), piece(hidden, p), piece(gate_up, p), piece(act, p), ctx,
                          RowOutput::kPartial);
      sum_piece(next, p);
    }
  }
  for (int p = 0; p < n; ++p) o.compute_waits_for(p, ctx);  // the caller reads every row
}

int64_t Qwen3ForCausalLM::decode_split_cells() const {
  const Qwen3Attention& attn = layers_.front()->self_attn();
  return kernels::cuda::decode_attention_split_cells(attn.q_width() / config_.head_dim,
                                                     attn.num_kv_heads(), config_.head_dim);
}

int Qwen3ForCausalLM::decode_cluster_context_bound(int64_t batch) const {
  const Qwen3Attention& attn = layers_.front()->self_attn();
  return kernels::cuda::decode_cluster_context_bound(batch, attn.q_width() / config_.head_dim,
                                                     attn.num_kv_heads(), config_.head_dim,
                                                     decode_split_cells());
}

void Qwen3ForCausalLM::reserve_decode_scratch() {
  // The kernel's grid is the GPU's resident CTA slots whatever the batch, so one size serves
  // every batch.
  const Qwen3Attention& attn = layers_.front()->self_attn();
  const int64_t cells = decode_split_cells();
  const int64_t g = attn.q_width() / config_.head_dim / attn.num_kv_heads();
  workspace_.get(kSplitOut, DType::kF32, {cells, g, config_.head_dim});
  workspace_.get(kSplitLse, DType::kF32, {cells, g});
  // The merging CTA resets its counter, so zero once is zero between every later call.
  workspace_.get(kSplitCounters, DType::kI32, {cells / 2});
  workspace_.zero(kSplitCounters);
}

void Qwen3ForCausalLM::attach_fp8_prefill_staging(AttentionMetadata& m) {
  if (!fp8_cuda_cache_ || workspace_.slot_bytes(kFp8StagingK) == 0) return;
  const int64_t hkv = layers_.front()->self_attn().num_kv_heads(), d = config_.head_dim;
  const int64_t block_bytes = kv_block_size_ * hkv * d * static_cast<int64_t>(sizeof(uint16_t));
  const int64_t capacity = static_cast<int64_t>(workspace_.slot_bytes(kFp8StagingK)) / block_bytes;
  // The prefill kernels' rows of the block table: those after the lead rows.
  const int64_t table_rows = m.block_tables.size(0) - m.lead_rows;
  const int64_t entries = table_rows * m.block_tables.size(1);
  if (m.kv_blocks > 0 && m.kv_blocks <= capacity &&
      entries * static_cast<int64_t>(sizeof(int32_t)) <=
          static_cast<int64_t>(workspace_.slot_bytes(kFp8StagingTables))) {
    m.fp8_staging_k =
        workspace_.get(kFp8StagingK, DType::kBf16, {capacity, kv_block_size_, hkv, d});
    m.fp8_staging_v =
        workspace_.get(kFp8StagingV, DType::kBf16, {capacity, kv_block_size_, hkv, d});
    m.fp8_staging_tables =
        workspace_.get(kFp8StagingTables, DType::kI32, {table_rows, m.block_tables.size(1)});
  }
}

void Qwen3ForCausalLM::reserve_fp8_prefill_staging(int64_t blocks, int64_t table_entries) {
  if (!fp8_cuda_cache_) return;
  CHECK_GT(blocks, 0);
  CHECK_GT(table_entries, 0);
  const int64_t hkv = layers_.front()->self_attn().num_kv_heads();
  workspace_.get(kFp8StagingK, DType::kBf16, {blocks, kv_block_size_, hkv, config_.head_dim});
  workspace_.get(kFp8StagingV, DType::kBf16, {blocks, kv_block_size_, hkv, config_.head_dim});
  workspace_.get(kFp8StagingTables, DType::kI32, {table_entries});
}

Workspace& Qwen3ForCausalLM::logits_workspace(int64_t rows) {
  const bool overflow = workspace_.frozen() && workspace_.slot_bytes(kSelected) <
                                                   static_cast<size_t>(rows * config_.hidden_size) *
                                                       dtype_size(DType::kBf16);
  return overflow ? overflow_ : workspace_;
}

TensorView Qwen3ForCausalLM::select_rows(const TensorView& hidden, const TensorView& logits_indices,
                                         const ExecContext& ctx) {
  // No indices: every row of hidden in order (a decode step), read in place.
  const bool all_rows = logits_indices.data == nullptr;
  const int64_t s = all_rows ? hidden.size(0) : logits_indices.size(0), h = config_.hidden_size;
  // Row gather [T, H] -> [S, H] through the embedding kernel (hidden as the "table"). The slot
  // is sized in both cases, so a frozen workspace never grows from a later gather.
  TensorView selected = logits_workspace(s).get(kSelected, DType::kBf16, {s, h});
  if (all_rows) return hidden;
  const PhaseScope phase(ctx, Phase::kElementwise);
  kernels::embedding(selected, logits_indices, hidden, 0, ctx);
  return selected;
}

void Qwen3ForCausalLM::compute_logits(const TensorView& logits, const TensorView& hidden,
                                      const TensorView& logits_indices, const ExecContext& ctx) {
  const TensorView selected = select_rows(hidden, logits_indices, ctx);
  const int64_t s = selected.size(0);
  Workspace& ws = logits_workspace(s);
  const int64_t shard = lm_head_->shard_rows();
  const bool multi = comm_->world_size() > 1;
  const TensorView shard_logits =
      multi ? ws.get(kShardLogits, DType::kF32, {s, shard}) : TensorView();
  const TensorView gathered =
      multi ? ws.get(kGathered, DType::kF32, {comm_->world_size(), s, shard}) : TensorView();
  lm_head_->forward(logits, selected, shard_logits, gathered, ctx);
}

TensorView Qwen3ForCausalLM::compute_shard_logits(const TensorView& hidden,
                                                  const TensorView& logits_indices,
                                                  const ExecContext& ctx) {
  CHECK_GT(comm_->world_size(), 1);
  const TensorView selected = select_rows(hidden, logits_indices, ctx);
  const int64_t s = selected.size(0);
  // The same slot compute_logits sized at warm-up, so a frozen workspace never grows.
  const TensorView shard_logits =
      logits_workspace(s).get(kShardLogits, DType::kF32, {s, lm_head_->shard_rows()});
  lm_head_->forward_shard(shard_logits, selected, ctx);
  return shard_logits;
}

}  // namespace nanovllm
