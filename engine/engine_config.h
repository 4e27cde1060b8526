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
  // vLLM's --enable-chunked-prefill: a step is a token budget (max_num_batched_tokens) shared
  // by running decodes and prompt chunks, so a prompt may take several steps and may be
  // longer than the budget. false: nano-vllm's rule, a prompt is prefilled in one step and
  // must fit the budget (max_num_batched_tokens >= max_model_len).
  bool enable_chunked_prefill = true;
  // vLLM's --long-prefill-token-threshold: the most tokens one sequence's chunk takes in a
  // step (0 = up to the whole budget), so one long prompt cannot hold the running decodes for
  // a whole budget's worth of prefill. A prompt up to this long (and within the budget) is
  // prefilled whole in a pure step first, as nano-vllm does; a longer one goes in chunks,
  // decodes first. 4096: measured on an H200 (0.6B), 64 decoding sequences stall 177 ms
  // while a 32k prompt arrives, against 737 ms unchunked and 543 ms at 0 (issue 18's note).
  // A prompt alone in the scheduler (nothing else running or waiting) is not capped.
  int long_prefill_token_threshold = 4096;
  // With chunking: one step holds the decodes and the chunks (mixed), or decode steps and
  // chunk steps alternate while both are pending (false). Mixed measured as fast (issue 18).
  bool mixed_chunked_steps = true;
  // --tp > 1: steps whose every row allows it sample from the LM head's vocabulary shards
  // instead of gathering the logits to rank 0 (engine/shard_sampling_plan.h); 1 = never
  // (--tp 1, or --disable-shard-sampling). vocab_size: the model's, which the rule reads.
  int shard_sampling_ranks = 1;
  int64_t vocab_size = 0;
  // vLLM's --async-scheduling: while a decode step runs, the engine schedules and launches
  // the next one (its input tokens taken on the device), so the host's work between steps
  // leaves the GPU busy; the step's results are read and postprocessed meanwhile. It applies
  // where the executor accepts pending inputs (one GPU with decode graphs) and the next step
  // decodes exactly the sequences running, none asking for logprobs. false: --no-async-scheduling.
  bool async_scheduling = true;

  // nano-vllm: max_model_len = min(max_model_len, max_position_embeddings).
  void cap_max_model_len(int max_position_embeddings);

  // Throws std::invalid_argument naming the setting and the values involved.
  // num_kvcache_blocks may still be -1 here; LLMEngine requires it set (> 0).
  void validate() const;
};

}  // namespace nanovllm
