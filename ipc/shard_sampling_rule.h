// Which sampled rows may be drawn from the LM head's vocabulary shards instead of gathered
// logits (kernels/shard_sampler.h states the draw; rank 0's engine applies this rule per row
// before it sets StepCommand::sample_from_shards). The rule is exact: a row it admits draws the
// token the full-row sampler would. Here, not in kernels/, because the engine decides it and
// knows no device; rank/ asserts that its constants match the kernels'.
#pragma once

#include <cstdint>

namespace nanovllm {

// The largest top_k drawn from shards (kernels::kShardCandidates keys a shard gives a row).
inline constexpr int kShardSamplingMaxTopK = 64;
// The most ranks one merge reads (kernels::kMaxShardRanks).
inline constexpr int kShardSamplingMaxRanks = 16;

// Columns of rank r's LM-head shard holding real tokens: ceil(vocab / tp) each, the last
// shard short (its padding rows are zeros past the vocabulary); <= 0 for an empty shard.
int64_t shard_vocab_columns(int64_t vocab, int tp, int rank);

// Whether a row sampling with these parameters (no logit processing: no penalties, bias or
// min_tokens mask at that row, and no logprobs) decomposes over `tp` shards of `vocab`: greedy;
// unfiltered (no top-k cut, top_p >= 1, min_p <= 0); or a top-k cut with top_k <= the shard
// limit and below every shard's width (each shard then holds its own top k).
bool sampling_rule_decomposes(float temperature, int32_t top_k, float top_p, float min_p,
                              int64_t vocab, int tp);

}  // namespace nanovllm
