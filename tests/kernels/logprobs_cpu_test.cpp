// The CPU reference of kernels/logprobs.h against what the header defines, computed here
// independently: log_softmax in long double, the rank as a count, the top alternatives by a
// full std::sort; and the row plumbing (skip rules, num_top_index, strided rows, padding
// entries of the top lists).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/logprobs.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr int64_t kWidth = 24;  // top list width, > kMaxLogprobs on purpose
constexpr int32_t kUnwritten = -7;

// One call's inputs and outputs; outputs start as sentinels so skipped rows show.
struct Call {
  int64_t vocab = 0, ld = 0;
  std::vector<float> logits;                     // [R, ld]
  std::vector<int32_t> targets, num_top, index;  // [R], [M], [R] (empty: identity)
  std::vector<float> logprob, top_logprobs;      // [R], [R, kWidth]
  std::vector<int32_t> rank, top_ids;            // [R], [R, kWidth]
  int64_t rows() const { return static_cast<int64_t>(targets.size()); }
};

Call& run(Call& c) {
  const int64_t r = c.rows();
  c.logprob.assign(r, 123.0f);
  c.rank.assign(r, kUnwritten);
  c.top_ids.assign(r * kWidth, kUnwritten);
  c.top_logprobs.assign(r * kWidth, 123.0f);
  TensorView logits = test::view(c.logits, {r, c.ld});
  logits.shape[1] = c.vocab;  // rows strided by ld
  const int64_t m = static_cast<int64_t>(c.num_top.size());
  kernels::cpu::token_logprobs({logits, test::view(c.targets, {r}), test::view(c.num_top, {m}),
                                c.index.empty() ? TensorView() : test::view(c.index, {r}),
                                test::view(c.logprob, {r}), test::view(c.rank, {r}),
                                test::view(c.top_ids, {r, kWidth}),
                                test::view(c.top_logprobs, {r, kWidth})});
  return c;
}

// One row, one target, n alternatives.
Call one_row(const std::vector<float>& row, int32_t target, int32_t n) {
  Call c;
  c.vocab = c.ld = static_cast<int64_t>(row.size());
  c.logits = row;
  c.targets = {target};
  c.num_top = {n};
  return run(c);
}

// log_softmax(x)[t] over the finite x, in long double.
long double log_softmax(const float* x, int64_t vocab, int64_t t) {
  long double mx = -INFINITY, sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    if (std::isfinite(x[v])) mx = std::max<long double>(mx, x[v]);
  for (int64_t v = 0; v < vocab; ++v)
    if (std::isfinite(x[v])) sum += std::exp(static_cast<long double>(x[v]) - mx);
  return static_cast<long double>(x[t]) - (mx + std::log(sum));
}

std::vector<float> normal_row(int64_t v, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(v);  // [V]
  for (float& e : x) e = d(rng);
  return x;
}

TEST(LogprobsCpu, TargetLogprobIsTheLogSoftmaxOfTheRow) {
  const auto row = normal_row(5000, 3.0f, 1);
  for (int32_t t : {0, 17, 2500, 4999}) {
    const Call c = one_row(row, t, 0);
    EXPECT_NEAR(c.logprob[0], static_cast<double>(log_softmax(row.data(), 5000, t)), 1e-5)
        << "target " << t;
  }
}

TEST(LogprobsCpu, RankCountsTokensAtOrAboveTheTargetIncludingTies) {
  const std::vector<float> row{1.0f, 3.0f, 3.0f, 2.0f, 3.0f, -kInf};
  // Ties count: each of the three 3.0 tokens has rank 3; the argmax of a row without ties 1.
  const std::vector<int32_t> want{5, 3, 3, 4, 3, 6};
  for (int32_t t = 0; t < 6; ++t) EXPECT_EQ(one_row(row, t, 0).rank[0], want[t]) << "target " << t;
  EXPECT_EQ(one_row({0.5f, 2.0f, 1.0f}, 1, 0).rank[0], 1);
}

TEST(LogprobsCpu, TopAlternativesFollowLogitDescendingThenIdAscending) {
  // Logits on a coarse grid: many ties, which only the id may order.
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> level(-20, 20);
  std::vector<float> row(3000);
  for (float& x : row) x = 0.25f * static_cast<float>(level(rng));
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  for (int32_t n : {1, 5, 20}) {
    const Call c = one_row(row, 7, n);
    for (int32_t j = 0; j < n; ++j) {
      EXPECT_EQ(c.top_ids[j], order[j]) << "n " << n << " entry " << j;
      EXPECT_NEAR(c.top_logprobs[j], static_cast<double>(log_softmax(row.data(), 3000, order[j])),
                  1e-5);
    }
  }
}

TEST(LogprobsCpu, EntriesPastTheRequestedCountAreMinusOneWithMinusInfinity) {
  const auto row = normal_row(100, 1.0f, 3);
  for (int32_t n : {0, 5, 20}) {
    const Call c = one_row(row, 3, n);
    for (int64_t j = 0; j < kWidth; ++j) {
      EXPECT_EQ(c.top_ids[j] >= 0, j < n) << "n " << n << " entry " << j;
      if (j >= n) {
        EXPECT_EQ(c.top_ids[j], -1);
        EXPECT_EQ(c.top_logprobs[j], -kInf);
      }
    }
  }
  // A vocabulary smaller than n: only its tokens are listed.
  const Call small = one_row({0.0f, 2.0f, 1.0f}, 0, 20);
  EXPECT_EQ(std::vector<int32_t>(small.top_ids.begin(), small.top_ids.begin() + 4),
            (std::vector<int32_t>{1, 2, 0, -1}));
}

TEST(LogprobsCpu, SkippedRowsWriteNothing) {
  Call c;
  c.vocab = c.ld = 10;
  c.logits = normal_row(6 * 10, 1.0f, 4);
  c.num_top = {3, -1, 0};
  c.index = {0, -1, 1, 0, 0, 2};     // row 1: no index; row 2: a slot without logprobs
  c.targets = {4, 4, 4, -1, 10, 9};  // rows 3, 4: targets outside the vocabulary
  run(c);
  for (int64_t r = 0; r < 6; ++r) {
    const bool written = r == 0 || r == 5;
    EXPECT_EQ(c.rank[r] != kUnwritten, written) << "row " << r;
    EXPECT_EQ(c.logprob[r] != 123.0f, written) << "row " << r;
    EXPECT_EQ(c.top_ids[r * kWidth] != kUnwritten, written) << "row " << r;
  }
  EXPECT_GE(c.top_ids[2], 0);  // row 0: slot 0's three alternatives
  EXPECT_EQ(c.top_ids[3], -1);
  EXPECT_EQ(c.top_ids[5 * kWidth], -1);  // row 5: slot 2 asks for none
}

TEST(LogprobsCpu, NumTopIndexGivesEachRowItsSlotsCount) {
  Call c;
  c.vocab = c.ld = 64;
  c.logits = normal_row(3 * 64, 2.0f, 5);
  c.num_top = {1, 4, 2};
  c.index = {2, 0, 1};
  c.targets = {0, 1, 2};
  run(c);
  const int32_t want[] = {2, 1, 4};
  for (int64_t r = 0; r < 3; ++r) {
    int32_t listed = 0;
    for (int64_t j = 0; j < kWidth; ++j) listed += c.top_ids[r * kWidth + j] >= 0;
    EXPECT_EQ(listed, want[r]) << "row " << r;
  }
}

TEST(LogprobsCpu, NanLogitsTakeNoPartAndMinusInfinityHasZeroProbability) {
  const std::vector<float> row{0.0f, kNan, -kInf, 1.0f, kNan};
  const Call c = one_row(row, 0, 5);
  const double lse = std::log(1.0 + std::exp(1.0));
  EXPECT_NEAR(c.logprob[0], -lse, 1e-6);
  EXPECT_EQ(c.rank[0], 2);  // tokens 0 and 3; NaN compares false
  EXPECT_EQ(std::vector<int32_t>(c.top_ids.begin(), c.top_ids.begin() + 5),
            (std::vector<int32_t>{3, 0, 2, -1, -1}));
  EXPECT_NEAR(c.top_logprobs[0], 1.0 - lse, 1e-6);
  EXPECT_EQ(c.top_logprobs[2], -kInf);
  EXPECT_EQ(one_row(row, 2, 0).logprob[0], -kInf);
}

TEST(LogprobsCpu, NegativeZeroTiesWithPositiveZeroSoTheIdDecides) {
  const Call c = one_row({-0.0f, -1.0f, 0.0f}, 2, 3);
  EXPECT_EQ(std::vector<int32_t>(c.top_ids.begin(), c.top_ids.begin() + 3),
            (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(c.rank[0], 2);
}

TEST(LogprobsCpu, StridedRowsReadOnlyTheirVocabulary) {
  // [2, 40] rows viewed as [2, 32]: the 8 extra columns (huge) would win every list.
  const auto dense = normal_row(2 * 32, 2.0f, 6);
  Call strided;
  strided.vocab = 32;
  strided.ld = 40;
  strided.logits.assign(2 * 40, 1e4f);
  for (int64_t r = 0; r < 2; ++r)
    std::copy_n(dense.begin() + r * 32, 32, strided.logits.begin() + r * 40);
  strided.targets = {5, 31};
  strided.num_top = {20, 3};
  Call contiguous = strided;
  contiguous.ld = 32;
  contiguous.logits = dense;
  run(strided);
  run(contiguous);
  EXPECT_EQ(strided.logprob, contiguous.logprob);
  EXPECT_EQ(strided.rank, contiguous.rank);
  EXPECT_EQ(strided.top_ids, contiguous.top_ids);
  EXPECT_EQ(strided.top_logprobs, contiguous.top_logprobs);
  EXPECT_LT(strided.logprob[0], 0.0f);
}

}  // namespace
}  // namespace nanovllm
