#include "ipc/shard_sampling_rule.h"

#include <algorithm>

namespace nanovllm {

int64_t shard_vocab_columns(int64_t vocab, int tp, int rank) {
  const int64_t width = (vocab + tp - 1) / tp;
  return std::min(width, vocab - rank * width);
}

bool sampling_rule_decomposes(float temperature, int32_t top_k, float top_p, float min_p,
                              int64_t vocab, int tp) {
  if (tp < 2 || tp > kShardSamplingMaxRanks || vocab <= 0) return false;
  const int64_t last = shard_vocab_columns(vocab, tp, tp - 1);  // the narrowest shard
  if (last <= 0) return false;
  if (temperature == 0.0f) return true;
  if (top_k > 0 && top_k < vocab) return top_k <= kShardSamplingMaxTopK && top_k < last;
  return !(top_p < 1.0f) && !(min_p > 0.0f);
}

}  // namespace nanovllm
