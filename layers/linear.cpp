#include "layers/linear.h"

#include "kernels/linear.h"
#include "kernels/phase_timer.h"

namespace nanovllm {

RowRange even_rows(const CheckpointTensor& t, int64_t n, int rank, int size) {
  CHECK_MSG(n % size == 0, t.name << ": " << n << " rows do not split over " << size << " ranks");
  const int64_t part = n / size;
  return RowRange{&t, rank * part, (rank + 1) * part};
}

void LinearBase::forward(const TensorView& y, const TensorView& x, const ExecContext& ctx) const {
  const PhaseScope phase(ctx, Phase::kGemm);
  kernels::linear(y, x, weight_.view(), bias_.empty() ? TensorView() : bias_.view(), ctx,
                  behind_norm_);
}

ColumnParallelLinear::ColumnParallelLinear(const Checkpoint& ckpt, const std::string& prefix,
                                           bool bias, const ShardInfo& s) {
  const CheckpointTensor& w = checkpoint_tensor(ckpt, prefix + ".weight", 2);
  weight_ =
      Parameter::load({even_rows(w, w.shape[0], s.tp_rank, s.tp_size)}, 0, w.shape[1], s.device);
  if (bias) {
    const CheckpointTensor& b = checkpoint_tensor(ckpt, prefix + ".bias", 1);
    bias_ = Parameter::load({even_rows(b, b.shape[0], s.tp_rank, s.tp_size)}, 0, 1, s.device);
  }
}

MergedColumnParallelLinear::MergedColumnParallelLinear(const Checkpoint& ckpt,
                                                       const std::vector<std::string>& prefixes,
                                                       bool bias, const ShardInfo& s) {
  behind_norm_ = true;  // the MLP's gate_up_proj, after post_attention_layernorm
  std::vector<RowRange> w_rows, b_rows;
  int64_t in = -1;
  for (const std::string& prefix : prefixes) {
    const CheckpointTensor& w = checkpoint_tensor(ckpt, prefix + ".weight", 2);
    CHECK(in < 0 || in == w.shape[1]);
    in = w.shape[1];
    w_rows.push_back(even_rows(w, w.shape[0], s.tp_rank, s.tp_size));
    if (bias) {
      const CheckpointTensor& b = checkpoint_tensor(ckpt, prefix + ".bias", 1);
      b_rows.push_back(even_rows(b, b.shape[0], s.tp_rank, s.tp_size));
    }
  }
  weight_ = Parameter::load(w_rows, 0, in, s.device);
  if (bias) bias_ = Parameter::load(b_rows, 0, 1, s.device);
  gate_up_pair_ =
      w_rows.size() == 2 && w_rows[0].end - w_rows[0].begin == w_rows[1].end - w_rows[1].begin;
}

bool MergedColumnParallelLinear::forward_act(const TensorView& act, const TensorView& x,
                                             const ExecContext& ctx) const {
  if (!gate_up_pair_) return false;
  const PhaseScope phase(ctx, Phase::kGemm);
  return kernels::linear_gate_up_act(act, x, weight_.view(),
                                     bias_.empty() ? TensorView() : bias_.view(), ctx);
}

bool QKVParallelLinear::forward_rope(const TensorView& qkv, const TensorView& x,
                                     const kernels::QkvRopeStore& r, const ExecContext& ctx) const {
  const PhaseScope phase(ctx, Phase::kGemm);
  return kernels::linear_qkv_rope_store(qkv, x, weight_.view(),
                                        bias_.empty() ? TensorView() : bias_.view(), r, ctx);
}

QKVParallelLinear::QKVParallelLinear(const Checkpoint& ckpt, const std::string& attn_prefix,
                                     int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                                     bool bias, const ShardInfo& s) {
  behind_norm_ = true;  // after input_layernorm
  CHECK_MSG(num_heads % s.tp_size == 0,
            num_heads << " attention heads over " << s.tp_size << " ranks");
  num_heads_ = num_heads / s.tp_size;
  // Fewer kv heads than ranks: each kv head is replicated on tp_size / num_kv_heads ranks.
  int64_t kv_first = 0;
  if (num_kv_heads >= s.tp_size) {
    CHECK_MSG(num_kv_heads % s.tp_size == 0, num_kv_heads << " kv heads over " << s.tp_size);
    num_kv_heads_ = num_kv_heads / s.tp_size;
    kv_first = s.tp_rank * num_kv_heads_;
  } else {
    CHECK_MSG(s.tp_size % num_kv_heads == 0,
              s.tp_size << " ranks over " << num_kv_heads << " kv heads");
    num_kv_heads_ = 1;
    kv_first = s.tp_rank / (s.tp_size / num_kv_heads);
  }
  const int64_t q0 = s.tp_rank * num_heads_ * head_dim, q1 = q0 + num_heads_ * head_dim;
  const int64_t k0 = kv_first * head_dim, k1 = k0 + num_kv_heads_ * head_dim;
  const std::string p = attn_prefix + ".";
  auto pieces = [&](const char* suffix, size_t ndim) {
    const CheckpointTensor& q = checkpoint_tensor(ckpt, p + "q_proj" + suffix, ndim);
    const CheckpointTensor& k = checkpoint_tensor(ckpt, p + "k_proj" + suffix, ndim);
    const CheckpointTensor& v = checkpoint_tensor(ckpt, p + "v_proj" + suffix, ndim);
    return std::vector<RowRange>{{&q, q0, q1}, {&k, k0, k1}, {&v, k0, k1}};
  };
  const std::vector<RowRange> w = pieces(".weight", 2);
  weight_ = Parameter::load(w, 0, w[0].tensor->shape[1], s.device);
  if (bias) bias_ = Parameter::load(pieces(".bias", 1), 0, 1, s.device);
}

RowParallelLinear::RowParallelLinear(const Checkpoint& ckpt, const std::string& prefix, bool bias,
                                     const ShardInfo& s, Communicator& comm)
    : comm_(&comm) {
  const CheckpointTensor& w = checkpoint_tensor(ckpt, prefix + ".weight", 2);
  const int64_t in = w.shape[1];
  CHECK_MSG(in % s.tp_size == 0, w.name << ": " << in << " columns over " << s.tp_size << " ranks");
  const int64_t part = in / s.tp_size;
  weight_ = Parameter::load({RowRange{&w, 0, w.shape[0]}}, s.tp_rank * part, (s.tp_rank + 1) * part,
                            s.device);
  if (bias && s.tp_rank == 0)
    bias_ = Parameter::load_full(checkpoint_tensor(ckpt, prefix + ".bias", 1), s.device);
}

void RowParallelLinear::forward(const TensorView& y, const TensorView& x, const ExecContext& ctx,
                                RowOutput output) const {
  LinearBase::forward(y, x, ctx);
  if (output == RowOutput::kReduced) all_reduce(y, ctx);
}

void RowParallelLinear::forward_silu_mul(const TensorView& y, const TensorView& gate_up,
                                         const TensorView& act, const ExecContext& ctx,
                                         RowOutput output) const {
  {
    // GEMM phase: on the fused path the activation is part of the GEMM's input loads.
    const PhaseScope phase(ctx, Phase::kGemm);
    kernels::linear_silu_mul(y, gate_up, act, weight_.view(),
                             bias_.empty() ? TensorView() : bias_.view(), ctx);
  }
  if (output == RowOutput::kReduced) all_reduce(y, ctx);
}

void RowParallelLinear::all_reduce(const TensorView& y, const ExecContext& ctx) const {
  if (comm_->world_size() == 1) return;
  const PhaseScope phase(ctx, Phase::kAllReduce);
  comm_->all_reduce_sum(y, ctx);
}

}  // namespace nanovllm
