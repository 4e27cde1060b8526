// CPython's random (bench/python_random.h) against values printed by Python 3.11, and the
// `long` and `interference` workloads drawn with it: the check sums of issue 18's `long`
// workload (Σ max_tokens 19,796, Σ prompt tokens 1,289,860, longest prompt 31,995) are the
// proof that the draw is Python's, number for number.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "bench/nanovllm_bench_workloads.h"
#include "bench/python_random.h"

namespace nanovllm::bench {
namespace {

constexpr int64_t kQwen3Vocab = 151936;

TEST(PythonRandom, SeedZeroDrawsAsPython) {
  // random.seed(0); [random.randint(0, 10000) for _ in range(5)], getrandbits(32),
  // randint(0, 2**40), getrandbits(7)
  PythonRandom rng(0);
  std::vector<int64_t> first;
  for (int i = 0; i < 5; ++i) first.push_back(rng.randint(0, 10000));
  EXPECT_EQ(first, (std::vector<int64_t>{6311, 6890, 663, 4242, 8376}));
  EXPECT_EQ(rng.getrandbits(32), 2087043557u);
  EXPECT_EQ(rng.randint(0, int64_t{1} << 40), 788025983492);  // 41 bits: two words
  EXPECT_EQ(rng.getrandbits(7), 74u);
}

TEST(PythonRandom, TwistsPastTheFirst624WordsAndSeedsWithSeveralWords) {
  PythonRandom rng(0);  // random.seed(0); 700 x getrandbits(32); getrandbits(32)
  for (int i = 0; i < 700; ++i) rng.getrandbits(32);
  EXPECT_EQ(rng.getrandbits(32), 2140787315u);
  PythonRandom wide((uint64_t{1} << 40) + 5);  // random.seed(2**40 + 5): key of two words
  std::vector<int64_t> first;
  for (int i = 0; i < 3; ++i) first.push_back(wide.randint(0, 10000));
  EXPECT_EQ(first, (std::vector<int64_t>{8263, 8469, 4400}));
}

TEST(LongWorkload, CheckSumsOfPythonsDraw) {
  const Workload w = long_workload(kQwen3Vocab, SamplingChoice{});
  ASSERT_EQ(w.requests.size(), 64u);
  EXPECT_EQ(w.name, "long");
  EXPECT_EQ(w.max_output_tokens(), 19796);
  EXPECT_EQ(w.prompt_tokens(), 1289860);
  size_t longest = 0, shortest = SIZE_MAX;
  for (const BenchRequest& r : w.requests) {
    longest = std::max(longest, r.prompt.size());
    shortest = std::min(shortest, r.prompt.size());
    EXPECT_TRUE(r.params.ignore_eos);
    EXPECT_GE(r.params.max_tokens, 64);
    EXPECT_LE(r.params.max_tokens, 512);
    for (const int32_t id : r.prompt) ASSERT_TRUE(id >= 0 && id <= 10000);
  }
  EXPECT_EQ(longest, 31995u);
  EXPECT_EQ(shortest, 4268u);
  // Every prompt first (length, then its ids), then every max_tokens: Python's order.
  const BenchRequest& first = w.requests.front();
  ASSERT_EQ(first.prompt.size(), 31766u);
  EXPECT_EQ(std::vector<int32_t>(first.prompt.begin(), first.prompt.begin() + 5),
            (std::vector<int32_t>{6311, 6890, 663, 4242, 8376}));
  std::vector<int32_t> max_tokens;
  for (int i = 0; i < 5; ++i) max_tokens.push_back(w.requests[i].params.max_tokens);
  EXPECT_EQ(max_tokens, (std::vector<int32_t>{269, 288, 371, 352, 470}));
  const BenchRequest& last = w.requests.back();
  ASSERT_EQ(last.prompt.size(), 19981u);
  EXPECT_EQ(std::vector<int32_t>(last.prompt.end() - 3, last.prompt.end()),
            (std::vector<int32_t>{5106, 7695, 138}));
  EXPECT_EQ(last.params.max_tokens, 467);
  EXPECT_TRUE(w.skip_when_too_long);
  EXPECT_TRUE(w.count_prefill_flops);
  EXPECT_LE(w.longest_sequence(), 33792);
}

TEST(LongWorkload, SmallVocabularyWrapsIdsAndKeepsTheDraw) {
  const Workload w = long_workload(1000, SamplingChoice{});
  EXPECT_EQ(w.prompt_tokens(), 1289860);
  EXPECT_EQ(w.max_output_tokens(), 19796);
  EXPECT_EQ(w.requests.front().prompt.front(), 6311 % 1000);
}

TEST(InterferenceWorkload, IssueShapeHasOneLateLongPrompt) {
  const Workload w = interference_workload(InterferenceShape{}, kQwen3Vocab, SamplingChoice{});
  ASSERT_EQ(w.requests.size(), 64u);
  ASSERT_EQ(w.late_requests.size(), 1u);
  for (const BenchRequest& r : w.requests) {
    EXPECT_EQ(r.prompt.size(), 512u);
    EXPECT_EQ(r.params.max_tokens, 1024);
    EXPECT_TRUE(r.params.ignore_eos);
  }
  EXPECT_EQ(w.late_requests[0].prompt.size(), 32000u);
  EXPECT_EQ(w.late_requests[0].params.max_tokens, 16);
  EXPECT_EQ(w.num_requests(), 65);
  EXPECT_EQ(w.prompt_tokens(), 64 * 512 + 32000);
  EXPECT_EQ(w.max_output_tokens(), 64 * 1024 + 16);
  EXPECT_EQ(w.longest_sequence(), 32016);
  EXPECT_TRUE(w.skip_when_too_long);
}

}  // namespace
}  // namespace nanovllm::bench
