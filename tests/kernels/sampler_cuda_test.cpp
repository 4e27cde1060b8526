// The CUDA sampler must return the CPU reference's tokens for identical logits: greedy,
// plain Gumbel-max, and every filter (top-k, top-p, min-p, combined). Both draw the same
// Philox bits; the only allowed divergence is a score tie within one ulp of expf/logf, which
// random f32 logits do not produce in practice, so tokens are compared exactly.
#include <gtest/gtest.h>

#include "kernels/sampler.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

constexpr int64_t kVocab = 151936;

struct Rows {
  std::vector<float> temperature, top_p, min_p;
  std::vector<int32_t> top_k, positions;
  std::vector<int64_t> seeds;
  void add(float t, int32_t k, float p, float mp, int64_t seed, int32_t pos) {
    temperature.push_back(t);
    top_k.push_back(k);
    top_p.push_back(p);
    min_p.push_back(mp);
    seeds.push_back(seed);
    positions.push_back(pos);
  }
  int64_t size() const { return static_cast<int64_t>(temperature.size()); }
};

std::vector<float> random_logits(int64_t rows, std::mt19937& rng) {
  // Spread like a real LM head: most mass on a few dozen tokens.
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> l(rows * kVocab);
  for (auto& x : l) x = d(rng);
  return l;
}

void check_same_tokens(const Rows& r, std::vector<float> logits) {
  const int64_t b = r.size();
  std::vector<int32_t> ref(b, -7);
  auto t = r.temperature, p = r.top_p, mp = r.min_p;
  auto k = r.top_k, pos = r.positions;
  auto seeds = r.seeds;
  kernels::SamplingBatch hb{host_view(logits.data(), DType::kF32, {b, kVocab}),
                            host_view(t.data(), DType::kF32, {b}),
                            host_view(k.data(), DType::kI32, {b}),
                            host_view(p.data(), DType::kF32, {b}),
                            host_view(mp.data(), DType::kF32, {b}),
                            host_view(seeds.data(), DType::kI64, {b}),
                            host_view(pos.data(), DType::kI32, {b}),
                            host_view(ref.data(), DType::kI32, {b})};
  kernels::cpu::sample(hb);
  DevVec<float> dl(logits), dt(t), dp(p), dmp(mp);
  DevVec<int32_t> dk(k), dpos(pos), dout(b);
  DevVec<int64_t> ds(seeds);
  kernels::SamplingBatch db{dl.view(DType::kF32, {b, kVocab}), dt.view(DType::kF32, {b}),
                            dk.view(DType::kI32, {b}),         dp.view(DType::kF32, {b}),
                            dmp.view(DType::kF32, {b}),        ds.view(DType::kI64, {b}),
                            dpos.view(DType::kI32, {b}),       dout.view(DType::kI32, {b})};
  kernels::cuda::sample(db, nullptr);
  const auto got = dout.host();
  for (int64_t i = 0; i < b; ++i)
    EXPECT_EQ(got[i], ref[i]) << "row " << i << " t=" << t[i] << " k=" << k[i] << " p=" << p[i]
                              << " min_p=" << mp[i];
}

TEST(SamplerCuda, GreedyBatch512MatchesCpuIncludingTies) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(1);
  Rows r;
  for (int i = 0; i < 512; ++i) r.add(0.f, 0, 1.f, 0.f, i, i);
  auto logits = random_logits(512, rng);
  // Row 0: the maximum appears twice; the lower index must win.
  logits[100] = logits[90000] = 1e4f;
  // Row 1: the last token is the maximum.
  logits[kVocab + kVocab - 1] = 1e4f;
  check_same_tokens(r, logits);
}

TEST(SamplerCuda, UnfilteredGumbelMaxMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(2);
  Rows r;
  for (int i = 0; i < 24; ++i)
    r.add(i % 3 == 0 ? 1.f : 0.6f + 0.1f * i, 0, 1.f, 0.f, 1000 + i, 5 * i);
  r.add(1.f, kVocab, 1.f, 0.f, -1, 0);  // top_k == V is no filter; seed bit pattern 2^64-1
  r.add(0.f, 5, 0.5f, 0.1f, 3, 3);      // greedy ignores the filters
  r.add(1e-38f, 0, 1.f, 0.f, 11, 2);    // raised to the minimum temperature, as on the CPU
  r.add(1e-45f, 0, 1.f, 0.f, 12, 2);
  r.add(0.01f, 0, 1.f, 0.f, 12, 2);  // the same draw as the row above
  check_same_tokens(r, random_logits(r.size(), rng));
}

TEST(SamplerCuda, TopKTopPMinPMatchCpu) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(3);
  Rows r;
  int64_t seed = 77;
  for (int pos : {0, 9}) {
    r.add(1.f, 1, 1.f, 0.f, seed++, pos);  // top-1 == greedy on scaled logits
    r.add(0.7f, 50, 1.f, 0.f, seed++, pos);
    r.add(1.f, 0, 0.9f, 0.f, seed++, pos);
    r.add(1.3f, 0, 0.3f, 0.f, seed++, pos);
    r.add(1.f, 0, 1.f, 0.05f, seed++, pos);
    r.add(0.8f, 20, 0.8f, 0.1f, seed++, pos);
    r.add(1.f, 1000, 0.95f, 0.f, seed++, pos);
    r.add(2.f, 0, 1e-6f, 0.f, seed++, pos);  // top-p keeps only the best token
    r.add(1.f, 0, 1.f, 0.f, seed++, pos);    // unfiltered row in a filtered batch
  }
  r.add(1e-38f, 20, 0.95f, 0.f, seed++, 4);  // tiny temperature on the filtered path
  // 40 filtered rows: more than one sort chunk.
  for (int i = 0; i < 22; ++i) r.add(1.f, 0, 0.9f, 0.02f, seed++, i);
  check_same_tokens(r, random_logits(r.size(), rng));
}

}  // namespace
}  // namespace nanovllm::test
