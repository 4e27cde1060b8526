// Tensor-parallel linear layers (nano-vllm's layers/linear.py). Each rank holds its shard of
// the checkpoint weight [out, in]:
//   ColumnParallelLinear        rows (output features) split over ranks;
//   MergedColumnParallelLinear  several column-parallel outputs stacked (gate_up_proj);
//   QKVParallelLinear           q heads and kv heads split (kv replicated when fewer than ranks);
//   RowParallelLinear           columns (input features) split; outputs summed by all-reduce.
#pragma once

#include <string>
#include <vector>

#include "kernels/communicator.h"
#include "kernels/rotary.h"
#include "layers/parameter.h"

namespace nanovllm {

struct ShardInfo {
  int tp_rank = 0;
  int tp_size = 1;
  Device device = Device::kCpu;
};

// y = x @ w_shard^T (+ bias_shard). x: [T, in_local] bf16, y: [T, out_local] bf16.
class LinearBase {
 public:
  void forward(const TensorView& y, const TensorView& x, const ExecContext& ctx) const;
  const TensorView& weight() const { return weight_.view(); }  // [out_local, in_local]
  int64_t out_features() const { return weight_.view().size(0); }
  int64_t in_features() const { return weight_.view().size(1); }
  bool has_bias() const { return !bias_.empty(); }

 protected:
  Parameter weight_;
  Parameter bias_;  // empty when the layer has no bias
  // The input is an RMSNorm's output (qkv_proj and gate_up_proj, in every Qwen3 layer): the norm
  // lets the GEMM after it launch at its start, which kernels::linear's Hopper rule asks for.
  bool behind_norm_ = false;
};

class ColumnParallelLinear : public LinearBase {
 public:
  // prefix: "model.layers.0.mlp.gate_proj" (".weight" / ".bias" appended).
  ColumnParallelLinear(const Checkpoint& ckpt, const std::string& prefix, bool bias,
                       const ShardInfo& shard);
};

class MergedColumnParallelLinear : public LinearBase {
 public:
  // Each prefix's output rows are split over ranks; the shards are stacked in order.
  MergedColumnParallelLinear(const Checkpoint& ckpt, const std::vector<std::string>& prefixes,
                             bool bias, const ShardInfo& shard);
  // act = silu(gate) * up of a layer of two equal outputs [gate; up] (the MLP's gate_up_proj)
  // in one kernel where the backend has one (kernels::linear_gate_up_act: decode sizes on
  // CUDA); false, nothing done, elsewhere. x: [T, in_local] bf16; act: [T, out_local / 2] bf16.
  bool forward_act(const TensorView& act, const TensorView& x, const ExecContext& ctx) const;

 private:
  bool gate_up_pair_ = false;  // two prefixes of the same rows
};

class QKVParallelLinear : public LinearBase {
 public:
  QKVParallelLinear(const Checkpoint& ckpt, const std::string& attn_prefix, int64_t num_heads,
                    int64_t num_kv_heads, int64_t head_dim, bool bias, const ShardInfo& shard);
  int64_t num_heads() const { return num_heads_; }        // q heads on this rank
  int64_t num_kv_heads() const { return num_kv_heads_; }  // kv heads on this rank
  // qkv = x @ w^T and then the q/k norm, rotary and KV store of `r` (its heads this layer's) in
  // one kernel where the backend has one (kernels::linear_qkv_rope_store: decode sizes on
  // CUDA); false, nothing done, elsewhere. x: [T, in_local] bf16; qkv: [T, out_local] bf16.
  bool forward_rope(const TensorView& qkv, const TensorView& x, const kernels::QkvRopeStore& r,
                    const ExecContext& ctx) const;

 private:
  int64_t num_heads_ = 0, num_kv_heads_ = 0;
};

// A row-parallel output summed over the ranks here, or left partial for the next RMSNorm to
// sum with its residual add (RMSNorm::forward_add_reduced: one fused kernel where the backend
// has one).
enum class RowOutput { kReduced, kPartial };

class RowParallelLinear : public LinearBase {
 public:
  // Bias (if any) is added by rank 0 only, so the all-reduce adds it once.
  RowParallelLinear(const Checkpoint& ckpt, const std::string& prefix, bool bias,
                    const ShardInfo& shard, Communicator& comm);
  void forward(const TensorView& y, const TensorView& x, const ExecContext& ctx,
               RowOutput output = RowOutput::kReduced) const;
  // The same on x = silu_and_mul(gate_up) (the MLP's down projection): one kernel where the
  // skinny GEMM takes the shape (kernels::linear_silu_mul), else the activation into act.
  // gate_up: [T, 2 in_local] bf16; act: [T, in_local] bf16 scratch.
  void forward_silu_mul(const TensorView& y, const TensorView& gate_up, const TensorView& act,
                        const ExecContext& ctx, RowOutput output = RowOutput::kReduced) const;
  // The all-reduce that forward ends with, for an output another kernel computed with this
  // layer's weights (the fused MLP): y summed over the ranks where output is kReduced.
  void reduce(const TensorView& y, const ExecContext& ctx, RowOutput output) const {
    if (output == RowOutput::kReduced) all_reduce(y, ctx);
  }

 private:
  void all_reduce(const TensorView& y, const ExecContext& ctx) const;
  Communicator* comm_;
};

// Rows [rank * n / size, (rank + 1) * n / size): CHECKs n % size == 0.
RowRange even_rows(const CheckpointTensor& t, int64_t n, int rank, int size);

}  // namespace nanovllm
