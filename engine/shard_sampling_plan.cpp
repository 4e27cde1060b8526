#include "engine/shard_sampling_plan.h"

#include <algorithm>

#include "ipc/shard_sampling_rule.h"

namespace nanovllm {

bool samples_from_shards(const Sequence& seq, const EngineConfig& config) {
  const SamplingParams& p = seq.sampling_params;
  if (p.logprobs.has_value() || p.penalized() || !p.logit_bias.empty()) return false;
  // The mask holds while the next token's position + 1 < num_prompt_tokens + min_tokens.
  if (p.min_tokens > 0 && seq.num_tokens() < seq.num_prompt_tokens + p.min_tokens) return false;
  return sampling_rule_decomposes(p.temperature, p.top_k, p.top_p, p.min_p, config.vocab_size,
                                  config.shard_sampling_ranks);
}

bool step_samples_from_shards(std::span<Sequence* const> seqs, const EngineConfig& config) {
  if (config.shard_sampling_ranks <= 1) return false;
  return std::all_of(seqs.begin(), seqs.end(),
                     [&](const Sequence* s) { return samples_from_shards(*s, config); });
}

}  // namespace nanovllm
