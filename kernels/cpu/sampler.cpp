// The CPU reference sampler: kernels/sampler.h's rules written as plainly as possible (a full
// sort of the candidates, sequential sums), for the CUDA sampler to be checked against.
#include "kernels/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_util.h"
#include "kernels/philox.h"
#include "kernels/sampler_math.h"

namespace nanovllm::kernels::cpu {

namespace {

struct RowParams {
  float temperature;
  int32_t top_k;
  float top_p, min_p;
  uint64_t seed;
  int32_t position;  // of the token being sampled
};

int32_t argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (logits[v] > logits[best]) best = v;  // strict: the lowest index wins ties
  return static_cast<int32_t>(best);
}

// The candidates after top-k, top-p and min-p, in (l desc, id asc) order (min-p's survivors
// in any order: the draw does not depend on it). Sorts only what the rules look at: the top
// k, or the tokens that carry top-p mass.
std::vector<int32_t> candidates(const std::vector<float>& l, const RowParams& p) {
  const int64_t vocab = static_cast<int64_t>(l.size());
  // (l desc, id asc) as one key: a strict total order even with NaN logits.
  const auto before = [&](int32_t a, int32_t b) {
    return candidate_key(l[a], a) > candidate_key(l[b], b);
  };
  std::vector<int32_t> ids(static_cast<size_t>(vocab));  // [V]
  std::iota(ids.begin(), ids.end(), 0);
  const bool use_k = p.top_k > 0 && p.top_k < vocab;
  if (use_k) {
    std::nth_element(ids.begin(), ids.begin() + p.top_k - 1, ids.end(), before);
    ids.resize(static_cast<size_t>(p.top_k));
  }
  const float l_max = l[*std::min_element(ids.begin(), ids.end(), before)];
  if (p.top_p < 1.0f) {
    if (!use_k) {  // a zero-mass token comes after every token with mass: never before the cut
      const int32_t first = *std::min_element(ids.begin(), ids.end(), before);
      std::erase_if(ids, [&](int32_t v) { return v != first && !(l[v] - l_max > kZeroMassBelow); });
    }
    std::sort(ids.begin(), ids.end(), before);
    uint64_t total = 0;
    for (int32_t v : ids) total += sampler_mass(l[v] - l_max);
    const uint64_t target = top_p_target(p.top_p, total);
    uint64_t mass = 0;
    size_t n = 0;
    while (n < ids.size()) {
      mass += sampler_mass(l[ids[n]] - l_max);
      ++n;
      if (mass >= target) break;
    }
    ids.resize(n);
  }
  if (p.min_p > 0.0f)  // the first token has sampler_exp(0) == 1 >= min_p: it always stays
    std::erase_if(ids, [&](int32_t v) { return !(sampler_exp(l[v] - l_max) >= p.min_p); });
  return ids;
}

int32_t sample_row(const float* logits, int64_t vocab, const RowParams& p) {
  if (p.temperature == 0.0f) return argmax(logits, vocab);
  const float t = effective_temperature(p.temperature);
  std::vector<float> l(static_cast<size_t>(vocab));  // [V] scaled logits
  for (int64_t v = 0; v < vocab; ++v) l[v] = scaled_logit(logits[v], t);
  const bool filtered = (p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.0f || p.min_p > 0.0f;
  std::vector<int32_t> kept;
  if (filtered) {
    kept = candidates(l, p);
  } else {
    kept.resize(static_cast<size_t>(vocab));
    std::iota(kept.begin(), kept.end(), 0);
  }
  int32_t best = -1;
  float best_score = -INFINITY;
  for (int32_t v : kept) {
    const float score = l[v] + gumbel_from_bits(sampler_random_bits(p.seed, v, p.position));
    if (best < 0 || score > best_score || (score == best_score && v < best)) {
      best = v;
      best_score = score;
    }
  }
  return best;
}

// Rule 0 (min_tokens): the row's logits with slot s's masked ids at -inf, in `copy`, when the
// row's token lands before min_tokens_position[s]; else the row itself.
const float* min_tokens_masked(const SamplingBatch& b, int64_t row, int32_t s, int64_t vocab,
                               std::vector<float>& copy) {
  const float* logits = elem<float>(b.logits, row);
  if (b.params.min_tokens_position.data == nullptr) return logits;
  const int32_t position = *elem<int32_t>(b.positions, row) + 1;
  if (!(position < *elem<int32_t>(b.params.min_tokens_position, s))) return logits;
  copy.assign(logits, logits + vocab);
  const int64_t width = b.params.min_tokens_masked_ids.size(1);
  for (int64_t j = 0; j < width; ++j) {
    const int32_t id = *elem<int32_t>(b.params.min_tokens_masked_ids, s, j);
    if (id >= 0 && id < vocab) copy[static_cast<size_t>(id)] = -INFINITY;
  }
  return copy.data();
}

}  // namespace

void sample(const SamplingBatch& b) {
  CHECK(b.logits.dtype == DType::kF32 && b.logits.ndim == 2 && b.logits.stride[1] == 1);
  CHECK(b.slots.dtype == DType::kI32 && b.positions.dtype == DType::kI32);
  CHECK(b.params.temperatures.dtype == DType::kF32 && b.params.top_k.dtype == DType::kI32);
  CHECK(b.params.top_p.dtype == DType::kF32 && b.params.min_p.dtype == DType::kF32);
  CHECK(b.params.seeds.dtype == DType::kI64 && b.out_tokens.dtype == DType::kI32);
  const int64_t rows = b.logits.size(0), vocab = b.logits.size(1);
  const int64_t num_slots = b.params.temperatures.size(0);
  CHECK_GT(vocab, 0);
  CHECK_EQ(b.slots.size(0), rows);
  CHECK_EQ(b.positions.size(0), rows);
  CHECK_EQ(b.params.min_tokens_position.data == nullptr,
           b.params.min_tokens_masked_ids.data == nullptr);
  if (b.params.min_tokens_position.data != nullptr) {
    CHECK(b.params.min_tokens_position.dtype == DType::kI32);
    CHECK(b.params.min_tokens_masked_ids.dtype == DType::kI32);
    CHECK_EQ(b.params.min_tokens_position.size(0), num_slots);
    CHECK_EQ(b.params.min_tokens_masked_ids.ndim, 2);
    CHECK_EQ(b.params.min_tokens_masked_ids.size(0), num_slots);
  }
  std::vector<float> masked_row;  // [V] rule 0's copy of a row
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = *elem<int32_t>(b.slots, r);
    int32_t token = 0;
    if (s >= 0) {
      CHECK_LT(s, num_slots);
      const RowParams p{*elem<float>(b.params.temperatures, s),
                        *elem<int32_t>(b.params.top_k, s),
                        *elem<float>(b.params.top_p, s),
                        *elem<float>(b.params.min_p, s),
                        static_cast<uint64_t>(*elem<int64_t>(b.params.seeds, s)),
                        *elem<int32_t>(b.positions, r) + 1};
      token = sample_row(min_tokens_masked(b, r, s, vocab, masked_row), vocab, p);
      if (b.last_tokens.data != nullptr) *elem<int32_t>(b.last_tokens, s) = token;
    }
    *elem<int32_t>(b.out_tokens, r) = token;
    if (b.row_passes.data != nullptr) *elem<int32_t>(b.row_passes, r) = s >= 0 ? 1 : 0;
  }
}

}  // namespace nanovllm::kernels::cpu
