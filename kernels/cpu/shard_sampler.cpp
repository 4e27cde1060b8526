// The CPU reference of sampling from vocabulary shards (kernels/shard_sampler.h): a full sort of
// each shard row's keys where the CUDA kernel narrows them with histograms.
#include "kernels/shard_sampler.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

namespace {

// The rows' slots and positions [rows] i32, and the draw parameters, on the CPU.
void check_rows(const SamplingSlotParams& p, const TensorView& slots, const TensorView& positions,
                int64_t rows) {
  check_draw_params(p, Device::kCpu);
  CHECK(slots.dtype == DType::kI32 && positions.dtype == DType::kI32);
  CHECK_EQ(slots.size(0), rows);
  CHECK_EQ(positions.size(0), rows);
}

// Row b's keys [kShardCandidates] from its `columns` logits (token ids from `start` on).
void shard_row(const float* x, int64_t start, int64_t columns, int64_t vocab, float t_raw,
               int32_t top_k, uint64_t seed, int32_t position, uint64_t* out) {
  std::fill_n(out, kShardCandidates, uint64_t{0});
  const ShardRule rule = shard_rule(t_raw, top_k, vocab);
  const float t = effective_temperature(t_raw);
  const auto id_of = [&](int64_t c) { return static_cast<int32_t>(start + c); };
  if (rule != ShardRule::kTopK) {
    uint64_t best = 0;
    for (int64_t c = 0; c < columns; ++c) {
      float score = x[c];
      if (rule == ShardRule::kUnfiltered)
        score =
            scaled_logit(x[c], t) + gumbel_from_bits(sampler_random_bits(seed, id_of(c), position));
      best = std::max(best, score_key(score, id_of(c)));
    }
    out[0] = best;
    return;
  }
  std::vector<uint64_t> keys(static_cast<size_t>(columns));  // [columns]
  for (int64_t c = 0; c < columns; ++c) keys[c] = candidate_key(scaled_logit(x[c], t), id_of(c));
  const int64_t k = std::min<int64_t>({top_k, kShardCandidates, columns});
  std::partial_sort(keys.begin(), keys.begin() + k, keys.end(), std::greater<>());
  std::copy_n(keys.begin(), k, out);
}

}  // namespace

void shard_candidates(const ShardCandidatesBatch& b) {
  const TensorView& l = b.shard_logits;
  CHECK(l.dtype == DType::kF32 && l.ndim == 2 && l.stride[1] == 1);
  const int64_t rows = l.size(0);
  CHECK(b.columns > 0 && b.columns <= l.size(1));
  CHECK(b.keys.dtype == DType::kI64 && b.keys.ndim == 2 && b.keys.is_contiguous());
  CHECK(b.keys.size(0) == rows && b.keys.size(1) == kShardCandidates);
  check_rows(b.params, b.slots, b.positions, rows);
  for (int64_t r = 0; r < rows; ++r) {
    uint64_t* out = reinterpret_cast<uint64_t*>(elem<int64_t>(b.keys, r));
    const int32_t s = *elem<int32_t>(b.slots, r);
    if (s < 0) {
      std::fill_n(out, kShardCandidates, uint64_t{0});
      continue;
    }
    CHECK_LT(s, b.params.temperatures.size(0));
    shard_row(elem<float>(l, r), b.vocab_start, b.columns, b.vocab,
              *elem<float>(b.params.temperatures, s), *elem<int32_t>(b.params.top_k, s),
              static_cast<uint64_t>(*elem<int64_t>(b.params.seeds, s)),
              *elem<int32_t>(b.positions, r) + 1, out);
  }
}

void merge_shard_candidates(const ShardMergeBatch& b) {
  const TensorView& k = b.keys;
  CHECK(k.dtype == DType::kI64 && k.ndim == 3 && k.is_contiguous());
  CHECK_EQ(k.size(2), kShardCandidates);
  const int tp = static_cast<int>(k.size(0));
  CHECK(tp >= 1 && tp <= kMaxShardRanks);
  const int64_t rows = k.size(1);
  check_rows(b.params, b.slots, b.positions, rows);
  CHECK(b.out_tokens.dtype == DType::kI32 && b.out_tokens.size(0) == rows);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = *elem<int32_t>(b.slots, r);
    int32_t token = 0;
    if (s >= 0) {
      CHECK_LT(s, b.params.temperatures.size(0));
      const ShardRule rule = shard_rule(*elem<float>(b.params.temperatures, s),
                                        *elem<int32_t>(b.params.top_k, s), b.vocab);
      token = merge_shard_row(reinterpret_cast<const uint64_t*>(elem<int64_t>(k, 0, r)), tp,
                              k.stride[0], rule, *elem<int32_t>(b.params.top_k, s),
                              *elem<float>(b.params.top_p, s), *elem<float>(b.params.min_p, s),
                              static_cast<uint64_t>(*elem<int64_t>(b.params.seeds, s)),
                              *elem<int32_t>(b.positions, r) + 1);
      if (b.last_tokens.data != nullptr) *elem<int32_t>(b.last_tokens, s) = token;
    }
    *elem<int32_t>(b.out_tokens, r) = token;
  }
}

}  // namespace nanovllm::kernels::cpu
