#include "kernels/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_util.h"
#include "kernels/philox.h"

namespace nanovllm::kernels::cpu {

namespace {

int32_t argmax(const float* logits, int64_t vocab) {
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (logits[v] > logits[best]) best = v;  // strict: the lowest index wins ties
  return static_cast<int32_t>(best);
}

// The candidates left after top-k, top-p and min-p, in (scaled logit desc, id asc) order;
// empty when no filter is active (every token is a candidate).
std::vector<int32_t> filter_candidates(const std::vector<float>& l, int32_t top_k, float top_p,
                                       float min_p) {
  const int64_t vocab = static_cast<int64_t>(l.size());
  const bool use_k = top_k > 0 && top_k < vocab;
  const bool use_p = top_p < 1.0f;
  const bool use_min_p = min_p > 0.0f;
  if (!use_k && !use_p && !use_min_p) return {};
  std::vector<int32_t> ids(static_cast<size_t>(vocab));  // [V]
  std::iota(ids.begin(), ids.end(), 0);
  auto before = [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  const int64_t keep = use_k ? top_k : vocab;
  std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), before);
  ids.resize(static_cast<size_t>(keep));
  const float l_max = l[ids[0]];
  if (use_p) {
    // Softmax over the top-k survivors; keep the shortest prefix whose mass reaches top_p.
    double total = 0.0;
    for (int32_t v : ids) total += std::exp(l[v] - l_max);
    double mass = 0.0;
    size_t n = 0;
    while (n < ids.size()) {
      mass += std::exp(l[ids[n]] - l_max);
      ++n;
      if (mass >= static_cast<double>(top_p) * total) break;
    }
    ids.resize(n);
  }
  if (use_min_p) {
    // p(v) / p_max = exp(l[v] - l_max); the first candidate always survives.
    size_t n = 1;
    while (n < ids.size() && std::exp(l[ids[n]] - l_max) >= min_p) ++n;
    ids.resize(n);
  }
  return ids;
}

int32_t sample_row(const float* logits, int64_t vocab, float temperature, int32_t top_k,
                   float top_p, float min_p, uint64_t seed, int32_t position) {
  if (temperature == 0.0f) return argmax(logits, vocab);
  temperature = effective_temperature(temperature);
  std::vector<float> l(logits, logits + vocab);  // [V] logits / temperature
  for (float& x : l) x /= temperature;
  const std::vector<int32_t> kept = filter_candidates(l, top_k, top_p, min_p);
  int32_t best = -1;
  float best_score = -INFINITY;
  auto consider = [&](int32_t v) {
    const float score = l[v] + gumbel_from_bits(sampler_random_bits(seed, v, position));
    if (best < 0 || score > best_score || (score == best_score && v < best)) {
      best = v;
      best_score = score;
    }
  };
  if (kept.empty()) {
    for (int32_t v = 0; v < static_cast<int32_t>(vocab); ++v) consider(v);
  } else {
    for (int32_t v : kept) consider(v);
  }
  return best;
}

}  // namespace

void sample(const SamplingBatch& b) {
  CHECK(b.logits.dtype == DType::kF32 && b.logits.ndim == 2 && b.logits.stride[1] == 1);
  CHECK(b.temperatures.dtype == DType::kF32 && b.top_k.dtype == DType::kI32);
  CHECK(b.top_p.dtype == DType::kF32 && b.min_p.dtype == DType::kF32);
  CHECK(b.seeds.dtype == DType::kI64 && b.positions.dtype == DType::kI32);
  CHECK(b.out_tokens.dtype == DType::kI32);
  const int64_t rows = b.logits.size(0), vocab = b.logits.size(1);
  CHECK_GT(vocab, 0);
  for (int64_t r = 0; r < rows; ++r) {
    *elem<int32_t>(b.out_tokens, r) = sample_row(
        elem<float>(b.logits, r), vocab, *elem<float>(b.temperatures, r),
        *elem<int32_t>(b.top_k, r), *elem<float>(b.top_p, r), *elem<float>(b.min_p, r),
        static_cast<uint64_t>(*elem<int64_t>(b.seeds, r)), *elem<int32_t>(b.positions, r));
  }
}

}  // namespace nanovllm::kernels::cpu
