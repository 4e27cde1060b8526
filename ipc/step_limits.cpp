#include "ipc/step_limits.h"

#include <algorithm>
#include <vector>

namespace nanovllm {

namespace {

int64_t len(const std::vector<int32_t>& v) {
  return static_cast<int64_t>(v.size());
}

std::string exceeds(const char* what, int64_t value, const char* limit_name, int64_t limit) {
  return std::string(what) + " " + std::to_string(value) + " exceeds " + limit_name + " " +
         std::to_string(limit);
}

std::string mismatch(const char* what, int64_t value, const char* expected_name, int64_t expected) {
  return std::string(what) + " " + std::to_string(value) + " != " + expected_name + " " +
         std::to_string(expected);
}

// Each value in [0, end); the first one outside, named by `what`[index].
std::string out_of_range(const char* what, const std::vector<int32_t>& values, int64_t end,
                         const char* end_name) {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0 || values[i] >= end)
      return std::string(what) + "[" + std::to_string(i) + "] " + std::to_string(values[i]) +
             " is outside [0, " + end_name + " " + std::to_string(end) + ")";
  return {};
}

// The contexts (cached + new tokens) of the command's sequences: cu_seqlens_k's differences for
// a prefill, context_lens for a decode. Empty with a message in `error` when inconsistent.
std::vector<int64_t> contexts_of(const StepCommand& cmd, int64_t seqs, std::string& error) {
  std::vector<int64_t> contexts;
  if (cmd.kind == StepKind::kDecode) {
    if (cmd.num_tokens() != seqs)
      error = mismatch("decode tokens", cmd.num_tokens(), "sequences", seqs);
    for (const int32_t c : cmd.context_lens) contexts.push_back(c);
    return contexts;
  }
  if (len(cmd.cu_seqlens_k) != seqs + 1) {
    error = mismatch("cu_seqlens_k entries", len(cmd.cu_seqlens_k), "sequences + 1", seqs + 1);
    return {};
  }
  if (cmd.cu_seqlens_q.front() != 0 || cmd.cu_seqlens_q.back() != cmd.num_tokens()) {
    error =
        mismatch("cu_seqlens_q's last entry", cmd.cu_seqlens_q.back(), "tokens", cmd.num_tokens());
    return {};
  }
  for (int64_t s = 0; s < seqs; ++s) {
    const auto i = static_cast<size_t>(s);
    const int64_t q = cmd.cu_seqlens_q[i + 1] - cmd.cu_seqlens_q[i];
    const int64_t k = cmd.cu_seqlens_k[i + 1] - cmd.cu_seqlens_k[i];
    if (q <= 0 || q > k || q > cmd.max_seqlen_q || k > cmd.max_seqlen_k) {
      error = "sequence " + std::to_string(s) + ": " + std::to_string(q) + " new of " +
              std::to_string(k) + " tokens, max_seqlen_q " + std::to_string(cmd.max_seqlen_q) +
              ", max_seqlen_k " + std::to_string(cmd.max_seqlen_k);
      return {};
    }
    contexts.push_back(k);
  }
  return contexts;
}

}  // namespace

int64_t max_blocks_per_seq(int64_t max_model_len, int64_t block_size) {
  return (max_model_len + block_size - 1) / block_size;
}

int64_t max_step_tokens(const StepLimits& limits) {
  const int64_t seqs = limits.max_num_seqs, model_len = limits.max_model_len;
  return std::max<int64_t>(std::min<int64_t>(limits.max_num_batched_tokens, seqs * model_len),
                           seqs);
}

std::string step_limit_violation(const StepCommand& cmd, const StepLimits& limits) {
  if (cmd.kind != StepKind::kPrefill && cmd.kind != StepKind::kDecode)
    return "not a prefill or decode command";
  const int64_t tokens = cmd.num_tokens(), max_tokens = max_step_tokens(limits);
  if (tokens <= 0) return "no tokens";
  if (tokens > max_tokens) return exceeds("tokens", tokens, "the step's most", max_tokens);
  if (len(cmd.positions) != tokens)
    return mismatch("positions", len(cmd.positions), "tokens", tokens);
  if (len(cmd.slot_mapping) != tokens)
    return mismatch("slot_mapping entries", len(cmd.slot_mapping), "tokens", tokens);
  if (cmd.kind == StepKind::kPrefill && cmd.cu_seqlens_q.empty()) return "no cu_seqlens_q";
  const int64_t seqs = cmd.num_seqs();
  if (seqs <= 0) return "no sequences";
  if (seqs > limits.max_num_seqs)
    return exceeds("sequences", seqs, "max_num_seqs", limits.max_num_seqs);
  std::string error;
  const std::vector<int64_t> contexts = contexts_of(cmd, seqs, error);
  if (!error.empty()) return error;
  const int64_t widest = max_blocks_per_seq(limits.max_model_len, limits.block_size);
  if (cmd.block_table_width <= 0 || cmd.block_table_width > widest)
    return exceeds("block_table_width", cmd.block_table_width, "ceil(max_model_len / block_size)",
                   widest);
  if (len(cmd.block_tables) != seqs * cmd.block_table_width)
    return mismatch("block_tables entries", len(cmd.block_tables), "sequences x width",
                    seqs * cmd.block_table_width);
  for (size_t s = 0; s < contexts.size(); ++s) {
    if (contexts[s] < 1 || contexts[s] > limits.max_model_len)
      return "sequence " + std::to_string(s) + "'s context " + std::to_string(contexts[s]) +
             " is outside [1, max_model_len " + std::to_string(limits.max_model_len) + "]";
    if (contexts[s] > int64_t{cmd.block_table_width} * limits.block_size)
      return exceeds("a context", contexts[s], "block_table_width x block_size",
                     int64_t{cmd.block_table_width} * limits.block_size);
  }
  if (std::string e =
          out_of_range("positions", cmd.positions, limits.max_model_len, "max_model_len");
      !e.empty())
    return e;
  // Logits rows beyond max_num_seqs are fine for the forward pass alone (a caller wanting every
  // position's logits); sampling is what is bounded: one sampling slot per sampled row.
  const int64_t rows = len(cmd.logits_indices);
  if (std::string e = out_of_range("logits_indices", cmd.logits_indices, tokens, "tokens");
      !e.empty())
    return e;
  if (std::string e =
          out_of_range("prompt_logprobs_indices", cmd.prompt_logprobs_indices, tokens, "tokens");
      !e.empty())
    return e;
  // Rank 0's sampling fields (never on a worker's copy).
  if (len(cmd.sample_slots) > limits.max_num_seqs)
    return exceeds("sampled rows", len(cmd.sample_slots), "max_num_seqs", limits.max_num_seqs);
  if (len(cmd.sample_slots) > rows)
    return exceeds("sample_slots", len(cmd.sample_slots), "logits rows", rows);
  if (std::string e =
          out_of_range("sample_slots", cmd.sample_slots, limits.max_num_seqs, "max_num_seqs");
      !e.empty())
    return e;
  if (static_cast<int64_t>(cmd.new_slot_params.size()) > limits.max_num_seqs)
    return exceeds("new slot parameters", static_cast<int64_t>(cmd.new_slot_params.size()),
                   "max_num_seqs", limits.max_num_seqs);
  for (const SlotSamplingParams& p : cmd.new_slot_params)
    if (p.slot < 0 || p.slot >= limits.max_num_seqs)
      return "new slot parameters for slot " + std::to_string(p.slot) +
             ", outside [0, max_num_seqs " + std::to_string(limits.max_num_seqs) + ")";
  return {};
}

}  // namespace nanovllm
