// Rank 0's choice, per step, between gathering the LM head's logits and sampling from its
// vocabulary shards (StepCommand::sample_from_shards; kernels/shard_sampler.h): shards where
// every sequence the step may sample for follows a rule that decomposes over them exactly.
#pragma once

#include <span>

#include "engine/engine_config.h"
#include "engine/sequence.h"

namespace nanovllm {

// A sequence whose next token may be drawn from shards: no logprobs, no logit processing
// (penalties, logit_bias, or a min_tokens mask still in force at its next token), and a
// sampling rule that decomposes over config.shard_sampling_ranks shards of config.vocab_size
// (ipc/shard_sampling_rule.h).
bool samples_from_shards(const Sequence& seq, const EngineConfig& config);

// Sampling from shards is on (shard_sampling_ranks > 1) and every sequence of the batch
// allows it (those that sample nothing this step too: a prompt's middle chunk counts as if it
// sampled, which only ever costs a gather).
bool step_samples_from_shards(std::span<Sequence* const> seqs, const EngineConfig& config);

}  // namespace nanovllm
