// The benchmark's "limit": the fewest seconds a step of the model could take on this machine
// if every operation ran at the machine's measured ceiling (bench/machine_limits.h) and
// moved only the bytes it cannot avoid. "% of limit" = limit / measured time.
//
// Per GPU under tensor parallelism P = tp (every rank does the same work at the same time):
//   qh = num_attention_heads / P      q heads per rank
//   kvh = max(1, num_key_value_heads / P)  KV heads per rank (replicated when P > kv heads)
//   I_r = intermediate_size / P,  V_r = ceil(vocab_size / P) (vocab-parallel lm_head),
//   D = head_dim
//   T = Σ q_i (tokens in the step), S = logits rows, q_i = new tokens of sequence i,
//   k_i = its context length after the step (cached tokens + q_i).
// Each operation costs  max(bytes / copy_bytes_per_s, FLOPs / bf16_flop_per_s)  where bytes
// counts reads + writes (as the copy bandwidth does) and 1 FMA = 2 FLOPs. Step limit = Σ ops.
//   GEMM (T rows, N outputs, K inputs), bf16 weight read once, bf16 activations in and out:
//     bytes = 2·N·K + 2·T·K + 2·T·N,  FLOPs = 2·T·N·K; per layer with H = hidden_size:
//     qkv_proj N = (qh + 2·kvh)·D, K = H    o_proj   N = H, K = qh·D
//     gate_up  N = 2·I_r,          K = H    down     N = H, K = I_r
//   attention, per layer (each sequence's K and V read once; c = 2 bytes a value for bf16,
//   (D + 1) / D for fp8 with its row exponents):
//     bytes = 2·c·kvh·D·Σ k_i   (K and V of the whole context read)
//           + 2·c·kvh·D·T       (the new K and V written)
//           + 4·qh·D·T        (q read, output written)
//     FLOPs = 4·D·qh·Σ_i [q_i·(k_i − q_i) + q_i·(q_i + 1)/2]  (QKᵀ and PV; causal within the
//             new tokens: new token j of q_i attends k_i − q_i + j keys)
//   lm_head, once (bf16 weight V_r × H read once, bf16 hidden in, f32 logits out):
//     bytes = 2·V_r·H + 2·S·H + 4·S·V_r,  FLOPs = 2·S·V_r·H
// Layer ops are multiplied by num_hidden_layers. Not counted, on purpose: embedding lookup,
// RMSNorm, rotary, SiLU·mul and residual adds (fusable into the neighbouring GEMMs, a few
// percent of the bytes), the all-reduce (another link, not HBM) and sampling; the limit is a
// lower bound, so leaving out work only makes it easier to reach, never impossible.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench/machine_limits.h"

namespace nanovllm {
struct ModelConfig;  // layers/model_config.h
}

namespace nanovllm::bench {

// The shape of a dense Qwen3-style decoder: all the limit model needs of a config.json.
struct ModelShape {
  int64_t hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0, num_attention_heads = 0,
          num_key_value_heads = 0, head_dim = 0, vocab_size = 0;
  bool tie_word_embeddings = false;
};
ModelShape model_shape(const ModelConfig& config);

// What the limit is computed for: one model, split over `tp` GPUs, on one kind of machine.
struct LimitSetup {
  ModelShape model;
  int tp = 1;
  MachineLimits machine;  // only copy_bytes_per_s and bf16_flop_per_s are read
  // Bytes of one cached K or V value: 2 (bf16), or (D + 1) / D with --kv-cache-dtype fp8 (one
  // byte each plus the row's exponent byte; kv_cache_bytes_per_value).
  double kv_bytes_per_value = 2;
};
// kv_bytes_per_value for a cache of this element (bf16 or fp8 e4m3) and head dim.
double kv_cache_bytes_per_value(bool fp8, int64_t head_dim);

// One sequence's part of a step.
struct SeqStep {
  int64_t new_tokens = 0;   // q_i: tokens computed this step (1 in decode)
  int64_t context_len = 0;  // k_i: tokens in its KV cache after the step (>= q_i)
};

// One engine step: the sequences it runs and how many rows of logits it computes.
struct Step {
  std::vector<SeqStep> seqs;
  int64_t num_logits = 0;      // S: one per sequence that samples this step
  int64_t num_tokens() const;  // T = Σ q_i
};

// `batch` sequences each decoding one token with `context` tokens cached after the step.
Step decode_step(int64_t batch, int64_t context);
// Whole prompts prefilled from an empty cache, one logits row each.
Step prefill_step(std::span<const int64_t> prompt_lens);

// One operation's cost, summed over layers (and over steps in run_breakdown).
struct OpCost {
  std::string name;  // qkv_proj, attention, o_proj, gate_up_proj, down_proj, lm_head
  double bytes = 0;  // read + written, per GPU
  double flops = 0;  // per GPU
  double seconds = 0;
};

// The step's operations in execution order, per GPU.
std::vector<OpCost> step_breakdown(const LimitSetup& setup, const Step& step);
// Σ of step_breakdown's seconds.
double step_limit_s(const LimitSetup& setup, const Step& step);
// A whole run: Σ over its steps of step_limit_s.
double run_limit_s(const LimitSetup& setup, std::span<const Step> steps);
// step_breakdown summed over a run, op by op (each step's seconds is a max of its own
// terms, so a run's seconds is not max(bytes/bw, flops/rate) of the run's totals).
std::vector<OpCost> run_breakdown(const LimitSetup& setup, std::span<const Step> steps);

// Bytes of bf16 weight matrices one rank holds (embedding, projections, lm_head unless tied;
// norm vectors left out): what a decode step must read at least once.
double weight_bytes_per_rank(const ModelShape& model, int tp);

// The FLOPs of prefilling whole prompts from an empty cache, over all GPUs (the `long`
// workload's flop_count), 1 FMA = 2 FLOPs. Per prompt of L tokens:
//   2 · L · W        W = the decoder layers' matmul weights, layers · (H·(nh + 2·nkv)·D
//                    + nh·D·H + 3·I·H) (qkv, o, gate_up, down; no embedding, no norms)
//   + 2 · V · H      the lm_head for the one logits row a prompt computes
//   + 4 · layers · nh · D · L·(L + 1)/2   causal attention, QKᵀ and PV (query j sees j keys)
double prefill_flops(const ModelShape& model, std::span<const int64_t> prompt_lens);

}  // namespace nanovllm::bench
