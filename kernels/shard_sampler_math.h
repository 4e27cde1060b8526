// The arithmetic of sampling from vocabulary shards (kernels/shard_sampler.h), shared by the CPU
// reference and the CUDA kernels: which rule a row follows, the key a shard gives a score, and
// rank 0's merge and draw for one row. Every step is the single-GPU sampler's own
// (sampler_math.h, philox.h), so both paths pick the same token.
#pragma once

#include <cstdint>

#include "kernels/philox.h"
#include "kernels/sampler_math.h"

namespace nanovllm::kernels {

// Keys each shard gives a row: the largest top_k sampled from shards.
inline constexpr int kShardCandidates = 64;
inline constexpr int kMaxShardRanks = 16;  // lists one merge reads (the --tp bound)

enum class ShardRule : int32_t { kGreedy, kUnfiltered, kTopK };

// The rule of a row sampled from shards (kernels/shard_sampler.h): greedy, top-k, or neither
// (then top_p >= 1 and min_p <= 0, which rank 0 checked before choosing the shards).
NANOVLLM_SAMPLER_HD ShardRule shard_rule(float temperature, int32_t top_k, int64_t vocab) {
  if (temperature == 0.0f) return ShardRule::kGreedy;
  return top_k > 0 && top_k < vocab ? ShardRule::kTopK : ShardRule::kUnfiltered;
}

// A score's key: -0 folded into +0 (they tie, so the lower id must win, as it does in the
// single-GPU sampler's comparisons). NaN takes no part: 0, the empty key.
NANOVLLM_SAMPLER_HD uint64_t score_key(float score, int32_t id) {
  if (score != score) return 0;
  return candidate_key(score == 0.0f ? 0.0f : score, id);
}

// Rank 0's token for one row from tp lists of kShardCandidates keys, list r at
// keys[r * stride], each sorted descending and 0-padded. `position`: of the token sampled.
NANOVLLM_SAMPLER_HD int32_t merge_shard_row(const uint64_t* keys, int tp, int64_t stride,
                                            ShardRule rule, int32_t top_k, float top_p, float min_p,
                                            uint64_t seed, int32_t position) {
  constexpr int kWidth = kShardCandidates;
  if (rule != ShardRule::kTopK) {  // one key a shard: the largest wins
    uint64_t best = 0;
    for (int r = 0; r < tp; ++r) best = keys[r * stride] > best ? keys[r * stride] : best;
    return best == 0 ? 0 : key_id(best);
  }
  // The first top_k keys of the tp sorted lists, merged: the row's top k in order.
  uint64_t cand[kWidth];
  int head[kMaxShardRanks] = {};
  const int k = top_k < kWidth ? top_k : kWidth;
  int n = 0;
  while (n < k) {
    int pick = -1;
    uint64_t key = 0;
    for (int r = 0; r < tp; ++r)
      if (head[r] < kWidth && keys[r * stride + head[r]] > key) {
        key = keys[r * stride + head[r]];
        pick = r;
      }
    if (pick < 0) break;
    cand[n++] = key;
    ++head[pick];
  }
  if (n == 0) return 0;
  const float l_max = key_logit(cand[0]);
  int keep = n;
  if (top_p < 1.0f) {  // the shortest prefix whose mass reaches top_p of the top k's
    uint64_t total = 0;
    for (int i = 0; i < n; ++i) total += sampler_mass(key_logit(cand[i]) - l_max);
    const uint64_t target = top_p_target(top_p, total);
    uint64_t run = 0;
    for (int i = 0; i < n; ++i) {
      run += sampler_mass(key_logit(cand[i]) - l_max);
      if (run >= target) {
        keep = i + 1;
        break;
      }
    }
  }
  int32_t best = -1;
  float best_score = 0.0f;
  for (int i = 0; i < keep; ++i) {
    const float l = key_logit(cand[i]);
    // The first token stays whatever min_p is: sampler_exp(0) == 1.
    if (min_p > 0.0f && i > 0 && !(sampler_exp(l - l_max) >= min_p)) continue;
    const int32_t id = key_id(cand[i]);
    const float score = l + gumbel_from_bits(sampler_random_bits(seed, id, position));
    if (best < 0 || score > best_score || (score == best_score && id < best)) {
      best = id;
      best_score = score;
    }
  }
  return best;
}

}  // namespace nanovllm::kernels
