// The limit model's arithmetic; the formulas and their constants are in limit_model.h.
#include "bench/limit_model.h"

#include <algorithm>

#include "kernels/check.h"
#include "layers/model_config.h"

namespace nanovllm::bench {
namespace {

constexpr double kBf16 = 2;  // bytes per weight, activation and KV cache element
constexpr double kF32 = 4;   // bytes per logit

// One rank's share of the model (the sharding of layers/linear.h and vocab_embedding.h).
struct RankShape {
  double hidden, q_heads, kv_heads, head_dim, intermediate, vocab, layers;
};

RankShape rank_shape(const ModelShape& m, int tp) {
  CHECK_GE(tp, 1);
  CHECK_GT(m.num_hidden_layers, 0);
  CHECK_EQ(m.num_attention_heads % tp, 0);
  CHECK_EQ(m.intermediate_size % tp, 0);
  // kv heads split when there are at least as many as ranks, else one replicated per rank.
  const int64_t kv_heads = m.num_key_value_heads >= tp ? m.num_key_value_heads / tp : 1;
  if (m.num_key_value_heads >= tp)
    CHECK_EQ(m.num_key_value_heads % tp, 0);
  else
    CHECK_EQ(tp % m.num_key_value_heads, 0);
  const int64_t vocab = (m.vocab_size + tp - 1) / tp;  // padded last shard, as ParallelLMHead
  return {static_cast<double>(m.hidden_size),
          static_cast<double>(m.num_attention_heads / tp),
          static_cast<double>(kv_heads),
          static_cast<double>(m.head_dim),
          static_cast<double>(m.intermediate_size / tp),
          static_cast<double>(vocab),
          static_cast<double>(m.num_hidden_layers)};
}

// y[T, N] = x[T, K] · w[N, K]ᵀ, bf16 throughout: weight read once, activations in and out.
OpCost gemm(const char* name, double t, double n, double k) {
  return {name, kBf16 * (n * k + t * k + t * n), 2 * t * n * k, 0};
}

OpCost attention(const RankShape& r, const Step& step, double kv_bytes_per_value) {
  double context = 0, attended = 0;  // Σ k_i; Σ over new tokens of the keys each attends
  for (const SeqStep& s : step.seqs) {
    const double q = static_cast<double>(s.new_tokens), k = static_cast<double>(s.context_len);
    context += k;
    attended += q * (k - q) + q * (q + 1) / 2;
  }
  const double t = static_cast<double>(step.num_tokens());
  const double kv_row = 2 * r.kv_heads * r.head_dim * kv_bytes_per_value;  // a token's K and V
  const double bytes = kv_row * context + kv_row * t + 2 * t * r.q_heads * r.head_dim * kBf16;
  return {"attention", bytes, 4 * r.head_dim * r.q_heads * attended, 0};
}

void scale(OpCost& op, double times) {
  op.bytes *= times;
  op.flops *= times;
}

}  // namespace

double kv_cache_bytes_per_value(bool fp8, int64_t head_dim) {
  CHECK_GT(head_dim, 0);
  return fp8 ? static_cast<double>(head_dim + 1) / static_cast<double>(head_dim) : kBf16;
}

ModelShape model_shape(const ModelConfig& c) {
  return {c.hidden_size,         c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
          c.num_key_value_heads, c.head_dim,          c.vocab_size,        c.tie_word_embeddings};
}

int64_t Step::num_tokens() const {
  int64_t t = 0;
  for (const SeqStep& s : seqs) t += s.new_tokens;
  return t;
}

Step decode_step(int64_t batch, int64_t context) {
  Step step;
  step.seqs.assign(static_cast<size_t>(batch), SeqStep{1, context});
  step.num_logits = batch;
  return step;
}

Step prefill_step(std::span<const int64_t> prompt_lens) {
  Step step;
  for (int64_t len : prompt_lens) step.seqs.push_back({len, len});
  step.num_logits = static_cast<int64_t>(prompt_lens.size());
  return step;
}

std::vector<OpCost> step_breakdown(const LimitSetup& setup, const Step& step) {
  CHECK_GT(setup.machine.copy_bytes_per_s, 0);
  CHECK_GT(setup.machine.bf16_flop_per_s, 0);
  for (const SeqStep& s : step.seqs) {
    CHECK_GE(s.new_tokens, 1);
    CHECK_GE(s.context_len, s.new_tokens);
  }
  CHECK_GE(step.num_logits, 0);
  const RankShape r = rank_shape(setup.model, setup.tp);
  const double t = static_cast<double>(step.num_tokens());
  const double s = static_cast<double>(step.num_logits);
  std::vector<OpCost> ops = {
      gemm("qkv_proj", t, (r.q_heads + 2 * r.kv_heads) * r.head_dim, r.hidden),
      attention(r, step, setup.kv_bytes_per_value),
      gemm("o_proj", t, r.hidden, r.q_heads * r.head_dim),
      gemm("gate_up_proj", t, 2 * r.intermediate, r.hidden),
      gemm("down_proj", t, r.hidden, r.intermediate),
  };
  for (OpCost& op : ops) scale(op, r.layers);
  OpCost lm_head = gemm("lm_head", s, r.vocab, r.hidden);
  lm_head.bytes += (kF32 - kBf16) * s * r.vocab;  // the logits are f32, not bf16
  ops.push_back(lm_head);
  // Layers are identical, so max(L·bytes/bw, L·flops/rate) = L·max(...) of one layer.
  for (OpCost& op : ops)
    op.seconds = std::max(op.bytes / setup.machine.copy_bytes_per_s,
                          op.flops / setup.machine.bf16_flop_per_s);
  return ops;
}

double step_limit_s(const LimitSetup& setup, const Step& step) {
  double seconds = 0;
  for (const OpCost& op : step_breakdown(setup, step)) seconds += op.seconds;
  return seconds;
}

double run_limit_s(const LimitSetup& setup, std::span<const Step> steps) {
  double seconds = 0;
  for (const Step& step : steps) seconds += step_limit_s(setup, step);
  return seconds;
}

std::vector<OpCost> run_breakdown(const LimitSetup& setup, std::span<const Step> steps) {
  std::vector<OpCost> total;
  for (const Step& step : steps) {
    const std::vector<OpCost> ops = step_breakdown(setup, step);
    if (total.empty()) {
      total = ops;
      continue;
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      total[i].bytes += ops[i].bytes;
      total[i].flops += ops[i].flops;
      total[i].seconds += ops[i].seconds;
    }
  }
  return total;
}

double weight_bytes_per_rank(const ModelShape& model, int tp) {
  const RankShape r = rank_shape(model, tp);
  const double per_layer = (r.q_heads + 2 * r.kv_heads) * r.head_dim * r.hidden  // qkv_proj
                           + r.hidden * r.q_heads * r.head_dim                   // o_proj
                           + 3 * r.intermediate * r.hidden;                      // gate_up, down
  const double vocab = r.vocab * r.hidden * (model.tie_word_embeddings ? 1 : 2);
  return kBf16 * (r.layers * per_layer + vocab);
}

double prefill_flops(const ModelShape& m, std::span<const int64_t> prompt_lens) {
  const double h = static_cast<double>(m.hidden_size), d = static_cast<double>(m.head_dim),
               nh = static_cast<double>(m.num_attention_heads),
               nkv = static_cast<double>(m.num_key_value_heads),
               inter = static_cast<double>(m.intermediate_size),
               layers = static_cast<double>(m.num_hidden_layers);
  const double layer_weights = layers * (h * (nh + 2 * nkv) * d + nh * d * h + 3 * inter * h);
  const double lm_head = static_cast<double>(m.vocab_size) * h;
  double flops = 0;
  for (const int64_t len : prompt_lens) {
    const double l = static_cast<double>(len);
    flops += 2 * l * layer_weights + 2 * lm_head + 4 * layers * nh * d * l * (l + 1) / 2;
  }
  return flops;
}

}  // namespace nanovllm::bench
