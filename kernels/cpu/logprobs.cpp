// The CPU reference of kernels/logprobs.h: lse in double, the rank by a plain count, the top
// alternatives by a partial sort, for the CUDA kernel to be checked against.
#include "kernels/logprobs.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_util.h"
#include "kernels/sampler_math.h"

namespace nanovllm::kernels::cpu {

namespace {

// log(sum_v exp(x[v])) over the finite x (-inf when none is).
double log_sum_exp(const float* x, int64_t vocab) {
  double mx = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v)
    if (std::isfinite(x[v])) mx = std::max(mx, static_cast<double>(x[v]));
  if (mx == -INFINITY) return mx;
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v)
    if (std::isfinite(x[v])) sum += std::exp(static_cast<double>(x[v]) - mx);
  return mx + std::log(sum);
}

void check_batch(const LogprobsBatch& b) {
  CHECK(b.logits.dtype == DType::kF32 && b.logits.ndim == 2 && b.logits.stride[1] == 1);
  const int64_t rows = b.logits.size(0);
  CHECK(b.targets.dtype == DType::kI32 && b.targets.size(0) == rows);
  CHECK(b.num_top.dtype == DType::kI32 && b.num_top.ndim == 1);
  if (b.num_top_index.data != nullptr)
    CHECK(b.num_top_index.dtype == DType::kI32 && b.num_top_index.size(0) == rows);
  else
    CHECK_EQ(b.num_top.size(0), rows);
  CHECK(b.target_logprob.dtype == DType::kF32 && b.target_logprob.size(0) == rows);
  CHECK(b.target_rank.dtype == DType::kI32 && b.target_rank.size(0) == rows);
  CHECK(b.top_ids.dtype == DType::kI32 && b.top_ids.ndim == 2 && b.top_ids.size(0) == rows);
  CHECK(b.top_logprobs.dtype == DType::kF32 && b.top_logprobs.ndim == 2 &&
        b.top_logprobs.size(0) == rows);
  CHECK_GE(b.top_ids.size(1), kMaxLogprobs);
  CHECK_EQ(b.top_logprobs.size(1), b.top_ids.size(1));
}

}  // namespace

void token_logprobs(const LogprobsBatch& b) {
  check_batch(b);
  const int64_t rows = b.logits.size(0), vocab = b.logits.size(1);
  const int64_t width = b.top_ids.size(1);
  std::vector<int32_t> ids;  // [V] the row's non-NaN tokens
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = b.num_top_index.data ? *elem<int32_t>(b.num_top_index, r) : r;
    if (i < 0) continue;
    CHECK_LT(i, b.num_top.size(0));
    const int32_t n = *elem<int32_t>(b.num_top, i);
    const int32_t t = *elem<int32_t>(b.targets, r);
    if (n < 0 || t < 0 || t >= vocab) continue;
    CHECK_LE(n, kMaxLogprobs);
    const float* x = elem<float>(b.logits, r);
    const double lse = log_sum_exp(x, vocab);
    int32_t rank = 0;
    for (int64_t v = 0; v < vocab; ++v) rank += x[v] >= x[t];
    *elem<float>(b.target_logprob, r) = static_cast<float>(static_cast<double>(x[t]) - lse);
    *elem<int32_t>(b.target_rank, r) = rank;
    ids.clear();
    for (int32_t v = 0; v < vocab; ++v)
      if (!std::isnan(x[v])) ids.push_back(v);
    const size_t top = std::min(ids.size(), static_cast<size_t>(n));
    // (x desc, id asc); -0 folded into +0, since they compare equal.
    const auto key = [x](int32_t v) { return candidate_key(x[v] == 0.0f ? 0.0f : x[v], v); };
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(top), ids.end(),
                      [&key](int32_t a, int32_t c) { return key(a) > key(c); });
    for (int64_t j = 0; j < width; ++j) {
      const bool used = j < static_cast<int64_t>(top);
      *elem<int32_t>(b.top_ids, r, j) = used ? ids[j] : -1;
      *elem<float>(b.top_logprobs, r, j) =
          used ? static_cast<float>(static_cast<double>(x[ids[j]]) - lse) : -INFINITY;
    }
  }
}

}  // namespace nanovllm::kernels::cpu
