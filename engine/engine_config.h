// Engine limits and KV-cache shape (nano-vllm's Config, the scheduling half). The model
// runner fills num_kvcache_blocks after its warm-up; everything else comes from the CLI.
#pragma once

#include <cstdint>
#include <vector>

namespace nanovllm {

struct EngineConfig {
  int max_num_batched_tokens = 16384;  // tokens computed per step (prefill budget)
  int max_num_seqs = 512;              // sequences running at once (decode batch bound)
  int max_model_len = 4096;            // prompt + completion tokens of one sequence
  int kvcache_block_size = 256;        // tokens per KV block
  int num_kvcache_blocks = -1;         // -1 until the model runner sized the cache
  std::vector<int32_t> eos_token_ids;  // any of them ends a sequence (unless ignore_eos)
  // vLLM's --enable-prefix-caching: false = no block is ever served from the cache (every
  // prompt token is computed), e.g. to benchmark without cache hits.
  bool enable_prefix_caching = true;

  // nano-vllm: max_model_len = min(max_model_len, max_position_embeddings).
  void cap_max_model_len(int max_position_embeddings);

  // Throws std::invalid_argument naming the setting and the values involved.
  // num_kvcache_blocks may still be -1 here; LLMEngine requires it set (> 0).
  void validate() const;
};

}  // namespace nanovllm
