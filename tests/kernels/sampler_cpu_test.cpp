#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "kernels/sampler.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

struct Row {
  float temperature = 1.0f;
  int32_t top_k = -1;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  int32_t position = 0;
};

// Samples every row against the same logits.
std::vector<int32_t> sample_rows(const std::vector<float>& logits, const std::vector<Row>& rows) {
  const int64_t b = static_cast<int64_t>(rows.size()), v = static_cast<int64_t>(logits.size());
  std::vector<float> all, temp, top_p, min_p;
  std::vector<int32_t> top_k, pos, out(b, -1);
  std::vector<int64_t> seeds;
  for (const Row& r : rows) {
    all.insert(all.end(), logits.begin(), logits.end());
    temp.push_back(r.temperature);
    top_k.push_back(r.top_k);
    top_p.push_back(r.top_p);
    min_p.push_back(r.min_p);
    seeds.push_back(static_cast<int64_t>(r.seed));
    pos.push_back(r.position);
  }
  kernels::SamplingBatch batch{test::view(all, {b, v}), test::view(temp, {b}),
                               test::view(top_k, {b}),  test::view(top_p, {b}),
                               test::view(min_p, {b}),  test::view(seeds, {b}),
                               test::view(pos, {b}),    test::view(out, {b})};
  kernels::cpu::sample(batch);
  return out;
}

// Rows that differ only in seed: the empirical distribution over many seeds.
std::vector<double> frequencies(const std::vector<float>& logits, Row proto, int n) {
  std::vector<Row> rows(n, proto);
  for (int i = 0; i < n; ++i) rows[i].seed = 1000003ull * i + 17;
  std::vector<double> freq(logits.size(), 0.0);
  for (int32_t t : sample_rows(logits, rows)) freq.at(t) += 1.0 / n;
  return freq;
}

std::vector<double> softmax(const std::vector<float>& l, double temperature) {
  std::vector<double> p(l.size());
  double mx = -INFINITY, sum = 0.0;
  for (float x : l) mx = std::max(mx, x / temperature);
  for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp(l[i] / temperature - mx);
  for (double& x : p) x /= sum;
  return p;
}

// Within 5 binomial standard deviations (plus a floor for p near 0).
void expect_matches(const std::vector<double>& freq, const std::vector<double>& p, int n) {
  for (size_t i = 0; i < p.size(); ++i)
    EXPECT_NEAR(freq[i], p[i], 5.0 * std::sqrt(p[i] * (1 - p[i]) / n) + 1e-3) << "token " << i;
}

TEST(SamplerCpu, ZeroTemperatureIsArgmaxWithLowestIndexOnTies) {
  const std::vector<float> logits{0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  EXPECT_EQ(sample_rows(logits, {Row{0.0f, -1, 1.0f, 0.0f, 1, 0}, Row{0.0f, 2, 0.5f, 0.0f, 9, 4}}),
            (std::vector<int32_t>{1, 1}));
}

TEST(SamplerCpu, TinyTemperaturesSampleAsTheMinimumTemperatureNotGarbage) {
  // Logits near 256 (as the random models give) over 1e-38 overflow to inf: every token would
  // tie. Raised to 0.01, the rows draw exactly what temperature 0.01 draws.
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 250.0f + 0.1f * static_cast<float>(i % 7);
  for (int seed = 1; seed <= 20; ++seed) {
    const std::vector<int32_t> got =
        sample_rows(logits, {Row{1e-45f, -1, 1.0f, 0.0f, static_cast<uint64_t>(seed), 3},
                             Row{1e-38f, 20, 0.95f, 0.0f, static_cast<uint64_t>(seed), 3},
                             Row{0.01f, -1, 1.0f, 0.0f, static_cast<uint64_t>(seed), 3},
                             Row{0.01f, 20, 0.95f, 0.0f, static_cast<uint64_t>(seed), 3}});
    EXPECT_EQ(got[0], got[2]) << "seed " << seed;
    EXPECT_EQ(got[1], got[3]) << "seed " << seed;
    EXPECT_EQ(logits[got[0]], *std::max_element(logits.begin(), logits.end()));  // T=0.01: peaked
  }
  EXPECT_FLOAT_EQ(kernels::effective_temperature(1e-38f), kernels::kMinTemperature);
  EXPECT_EQ(kernels::effective_temperature(0.0f), 0.0f);
  EXPECT_EQ(kernels::effective_temperature(0.5f), 0.5f);
}

TEST(SamplerCpu, EmpiricalFrequenciesMatchSoftmaxOverManySeeds) {
  const std::vector<float> logits{1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f};
  const int n = 40000;
  for (float t : {1.0f, 0.6f}) {
    Row proto;
    proto.temperature = t;
    proto.position = 7;
    expect_matches(frequencies(logits, proto, n), softmax(logits, t), n);
  }
}

TEST(SamplerCpu, TopKKeepsOnlyTheKLargestRenormalized) {
  const std::vector<float> logits{1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f};
  const int n = 30000;
  Row proto;
  proto.top_k = 2;
  const auto freq = frequencies(logits, proto, n);
  // Tokens 2 and 5 only, in ratio e^2 : e^1.5.
  const double p2 = 1.0 / (1.0 + std::exp(-0.5));
  expect_matches(freq, {0, 0, p2, 0, 0, 1 - p2}, n);
}

TEST(SamplerCpu, TopPKeepsSmallestPrefixReachingTheMass) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p = 0.75 keeps {0, 1} (0.5 < 0.75 <= 0.8).
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  const int n = 30000;
  Row proto;
  proto.top_p = 0.75f;
  expect_matches(frequencies(logits, proto, n), {0.625, 0.375, 0, 0}, n);
}

TEST(SamplerCpu, MinPDropsTokensBelowFractionOfTheMaximum) {
  // min_p = 0.2 -> threshold 0.1: keeps 0.5, 0.3, 0.15 and drops 0.05.
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  const int n = 30000;
  Row proto;
  proto.min_p = 0.2f;
  expect_matches(frequencies(logits, proto, n), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, n);
}

TEST(SamplerCpu, SameSeedAndPositionGiveSameTokenRegardlessOfBatch) {
  std::mt19937 rng(31);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> logits(1000);
  for (float& x : logits) x = dist(rng);
  std::vector<Row> rows;
  for (int i = 0; i < 64; ++i)
    rows.push_back(
        Row{0.8f, i % 3 == 0 ? 50 : -1, 0.95f, 0.0f, static_cast<uint64_t>(i / 4), i % 4});
  const auto together = sample_rows(logits, rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<Row> alone{rows[(i + 5) % rows.size()], rows[i]};
    EXPECT_EQ(sample_rows(logits, alone)[1], together[i]) << "row " << i;
  }
  // ...and the draw does change with the position (else sampling would repeat itself).
  std::map<int32_t, int> distinct;
  for (int pos = 0; pos < 50; ++pos)
    ++distinct[sample_rows(logits, {Row{1.0f, -1, 1.0f, 0.0f, 3, pos}})[0]];
  EXPECT_GT(distinct.size(), 5u);
}

}  // namespace
}  // namespace nanovllm
