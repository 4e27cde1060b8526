#include "rank/kv_cache_sizing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "ipc/step_limits.h"
#include "kernels/check.h"
#include "rank/model_runner.h"

namespace nanovllm {

int cpu_kv_cache_blocks(double space_gib, size_t block_bytes) {
  CHECK_GT(block_bytes, 0u);
  const double blocks = std::floor(space_gib * 1073741824.0 / static_cast<double>(block_bytes));
  return blocks <= 0 ? 0 : static_cast<int>(std::min(blocks, 2147483647.0));
}

int plan_kv_cache_blocks(const KvCacheSizing& sizing, const ModelConfig& config, Device device) {
  if (sizing.num_blocks_override) return *sizing.num_blocks_override;
  if (device == Device::kCuda) return 0;  // measured by the ModelRunner after its warm-up
  CHECK_GT(sizing.block_size, 0);
  CHECK_GT(sizing.max_model_len, 0);
  const size_t block_bytes =
      ModelRunner::kv_block_bytes(config, sizing.tp_size, sizing.block_size, sizing.kv_dtype);
  if (sizing.cpu_kv_cache_space_gib) {
    const int blocks = cpu_kv_cache_blocks(*sizing.cpu_kv_cache_space_gib, block_bytes);
    if (blocks <= 0)
      throw std::runtime_error(fmt::format(
          "--cpu-kv-cache-space {:g} GiB cannot hold one KV block of {} bytes (--block-size {} "
          "tokens); raise it, lower --block-size, or leave --cpu-kv-cache-space out to size the "
          "cache for the requests",
          *sizing.cpu_kv_cache_space_gib, block_bytes, sizing.block_size));
    return blocks;
  }
  const int64_t per_sequence = max_blocks_per_seq(sizing.max_model_len, sizing.block_size);
  const int64_t wanted = per_sequence * std::max(1, sizing.sequences);
  const int64_t cap = cpu_kv_cache_blocks(kDefaultCpuKvCacheMaxGib, block_bytes);
  const int64_t blocks = std::max(per_sequence, std::min(wanted, cap));
  return static_cast<int>(std::min<int64_t>(blocks, std::numeric_limits<int>::max()));
}

WarmupShape warmup_shape(int max_num_batched_tokens, int max_num_seqs, int max_model_len) {
  CHECK_GT(max_num_batched_tokens, 0);
  CHECK_GT(max_num_seqs, 0);
  CHECK_GT(max_model_len, 0);
  WarmupShape s;
  s.max_model_len = max_model_len;
  // No step holds more than max_num_seqs sequences of at most max_model_len new tokens each,
  // whatever the budget; a decode step has max_num_seqs tokens, which may exceed the budget.
  s.tokens = max_step_tokens(StepLimits{max_num_batched_tokens, max_num_seqs, max_model_len, 1});
  // Every sequence of the step, and every decode row, is one logits row of its own slot.
  s.rows = max_num_seqs;
  return s;
}

StepCommand warmup_step_command(const WarmupShape& shape, int block_table_width, int num_slots) {
  const int64_t tokens = shape.tokens, len = shape.max_model_len, rows = shape.rows;
  CHECK_GT(tokens, 0);
  CHECK_GT(len, 0);
  CHECK_GT(rows, 0);
  CHECK_GT(num_slots, 0);
  StepCommand cmd;
  cmd.kind = StepKind::kPrefill;
  cmd.cu_seqlens_q.push_back(0);
  cmd.cu_seqlens_k.push_back(0);
  for (int64_t start = 0; start < tokens; start += len) {
    const int q_len = static_cast<int>(std::min(len, tokens - start));
    const int prefix = static_cast<int>(len) - q_len;  // a chunk of a max_model_len sequence
    for (int t = 0; t < q_len; ++t) {
      cmd.input_ids.push_back(0);
      cmd.positions.push_back(prefix + t);
      cmd.slot_mapping.push_back(-1);
    }
    cmd.cu_seqlens_q.push_back(cmd.cu_seqlens_q.back() + q_len);
    cmd.cu_seqlens_k.push_back(cmd.cu_seqlens_k.back() + static_cast<int>(len));
    cmd.max_seqlen_q = std::max(cmd.max_seqlen_q, q_len);
  }
  cmd.max_seqlen_k = static_cast<int32_t>(len);
  const int64_t nseq = static_cast<int64_t>(cmd.cu_seqlens_q.size()) - 1;
  cmd.block_table_width = block_table_width;
  cmd.block_tables.assign(static_cast<size_t>(nseq * block_table_width), 0);
  for (int64_t r = 0; r < rows; ++r) {
    cmd.logits_indices.push_back(cmd.cu_seqlens_q[static_cast<size_t>(r % nseq) + 1] - 1);
    cmd.sample_slots.push_back(static_cast<int32_t>(r % num_slots));
  }
  for (int s = 0; s < std::min<int64_t>(rows, num_slots); ++s)
    cmd.new_slot_params.push_back(
        SlotSamplingParams{s, 1.0f, 50, 0.9f, 0.0f, static_cast<uint64_t>(s)});
  return cmd;
}

}  // namespace nanovllm
