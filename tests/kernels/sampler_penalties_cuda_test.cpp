// Rule P (logit_bias, presence / frequency / repetition penalties, min_tokens) and the
// sampled tokens' logprobs on the CUDA sampler, against the CPU reference at Qwen3's
// vocabulary: the same tokens (greedy and seeded Qwen3 sampling), the same token_state after
// several steps, the processed rows bit for bit (and untouched where rule P does not apply),
// logprobs within 1e-4 with the same ids and ranks.
#include <gtest/gtest.h>

#include <numeric>

#include "kernels/sampler_math.h"
#include "tests/kernels/sampler_cuda_case.h"

namespace nanovllm::test {
namespace {

using kernels::kTokenCountMax;
using kernels::kTokenInPrompt;

// The ids of row r's `count` largest logits, largest first.
std::vector<int32_t> top_ids(Case& c, int64_t r, int count) {
  std::vector<int32_t> ids(static_cast<size_t>(c.vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const float* l = c.row(r);
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(),
                    [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  ids.resize(static_cast<size_t>(count));
  return ids;
}

int32_t lowest_id(Case& c, int64_t r) {
  return static_cast<int32_t>(std::min_element(c.row(r), c.row(r) + c.vocab) - c.row(r));
}

// Row i has a slot of its own of kind i % 8 (every 5th row is padding); penalized slots start
// with prompt bits and generated counts on their row's top tokens, so the penalties decide.
Case penalties_case(int64_t b, uint32_t seed) {
  Case c;
  for (int64_t i = 0; i < b; ++i) {
    Slot kinds[] = {Slot{0.0f},
                    qwen3(0.6f, i),
                    qwen3(1.0f, i),
                    Slot{0.0f},
                    qwen3(0.7f, i),
                    Slot{1.0f, -1, 1.0f, 0.05f, i},
                    Slot{0.8f, -1, 0.9f, 0.0f, i},
                    Slot{0.0f}};
    kinds[0].repetition = 1.3f;  // greedy, all three penalties
    kinds[0].presence = 0.5f;
    kinds[0].frequency = 0.3f;
    kinds[1].repetition = 1.1f;  // Qwen3 sampling, penalized
    kinds[1].frequency = 0.2f;
    // kinds[2]: Qwen3 sampling, unprocessed (next to processed rows)
    kinds[4].presence = 1.0f;    // bias entries added below
    kinds[5].repetition = 0.8f;  // below 1: repeats are favoured
    kinds[6].frequency = 0.5f;   // with an active min_tokens mask, set below
    // kinds[7]: greedy, unprocessed
    c.add(kinds[i % 8], static_cast<int32_t>(10 + i));
    if (i % 5 == 4) c.row_slot.back() = -1;
  }
  c.fill_normal(seed);
  c.token_state.assign(c.slots.size() * c.vocab, 0);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(c.vocab) - 1);
  for (int64_t i = 0; i < b; ++i) {
    Slot& s = c.slots[i];
    const std::vector<int32_t> top = top_ids(c, i, 30);
    if (i % 8 == 3) s.bias = {{top[0], -100.0f}, {lowest_id(c, i), 100.0f}};
    if (i % 8 == 4) s.bias = {{top[1], 2.5f}, {top[7], 4.0f}, {id(rng), -3.0f}};
    if (i % 8 == 6) {
      s.min_pos = 1000;
      s.masked = {top[0], -1, top[2]};
    }
    if (!kernels::penalties_active(s.repetition, s.presence, s.frequency)) continue;
    uint16_t* state = c.token_state.data() + i * c.vocab;
    for (int j = 0; j < 30; j += 2) state[top[j]] = static_cast<uint16_t>(1 + j % 3);
    if (s.repetition != 1.0f) {
      for (int j = 1; j < 30; j += 3) state[top[j]] |= kTokenInPrompt;
      for (int j = 0; j < 200; ++j) state[id(rng)] |= kTokenInPrompt;
    }
  }
  return c;
}

TEST(SamplerPenaltiesCuda, PenaltiesBiasAndMinTokensMatchCpuOverSeveralSteps) {
  SKIP_WITHOUT_CUDA();
  Case c = penalties_case(41, 1);
  int moved = 0;  // greedy penalized rows that did not draw their raw argmax
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const Out got = expect_same_as_cpu(c);
    for (int64_t r = 0; r < c.rows(); ++r)
      if (c.row_slot[r] >= 0 && r % 8 == 0)
        moved += got.tokens[r] != std::max_element(c.row(r), c.row(r) + c.vocab) - c.row(r);
    // The next step: the state the sampler left, the next position, new logits.
    c.token_state = got.state;
    for (int32_t& p : c.positions) ++p;
    c.fill_normal(100 + static_cast<uint32_t>(step));
  }
  EXPECT_GT(moved, 0);
}

TEST(SamplerPenaltiesCuda, EveryBlocksPerRowChoiceMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  // The processing kernel splits a processed row over 16 blocks at batch 1 and 9, 6 at 40
  // (uneven shares), and gives 300 rows one block each; the sampler's clusters vary as well.
  for (int64_t b : {1, 9, 40, 300}) {
    SCOPED_TRACE("batch " + std::to_string(b));
    expect_same_as_cpu(penalties_case(b, 2 + static_cast<uint32_t>(b)));
  }
}

TEST(SamplerPenaltiesCuda, BiasOfMinus100OnTheArgmaxAndPlus100OnALowTokenDecideTheDraw) {
  SKIP_WITHOUT_CUDA();
  Case c;
  for (int i = 0; i < 8; ++i) c.add(i % 2 ? qwen3(0.6f, i) : Slot{0.0f}, 3);
  c.fill_normal(3);
  for (int64_t r = 0; r < c.rows(); ++r) {
    const int32_t argmax = top_ids(c, r, 1)[0];
    if (r < 4)
      c.slots[r].bias = {{argmax, -100.0f}};
    else
      c.slots[r].bias = {{lowest_id(c, r), 100.0f}, {argmax, -100.0f}};
  }
  const Out got = expect_same_as_cpu(c);
  for (int64_t r = 0; r < c.rows(); ++r) {
    EXPECT_NE(got.tokens[r], top_ids(c, r, 1)[0]) << describe(c, r);
    if (r >= 4) {
      EXPECT_EQ(got.tokens[r], lowest_id(c, r)) << describe(c, r);
    }
  }
}

TEST(SamplerPenaltiesCuda, UnprocessedRowsReadTheRawLogitsAndLeaveTheirProcessedRowsUntouched) {
  SKIP_WITHOUT_CUDA();
  // Processed rows (a bias) next to unprocessed ones: penalties given but off, an empty bias
  // list, a min_tokens mask whose position has passed; and padding.
  Case c;
  Slot biased{0.0f};
  Slot passed{0.0f};
  passed.min_pos = 5;
  for (int i = 0; i < 12; ++i) c.add(i % 3 == 0 ? biased : i % 3 == 1 ? passed : qwen3(0.6f, i), 9);
  c.row_slot[5] = -1;
  c.fill_normal(4);
  for (int64_t r = 0; r < c.rows(); r += 3) c.slots[r].bias = {{top_ids(c, r, 1)[0], -100.0f}};
  for (int64_t r = 1; r < c.rows(); r += 3) c.slots[r].masked = top_ids(c, r, 1);
  c.token_state.assign(c.slots.size() * c.vocab, kTokenInPrompt | 3);  // never read: all off
  Buffers after;
  const Out got = run_cuda(c, &after);
  expect_same_as_cpu(c);
  for (int64_t r = 0; r < c.rows(); ++r) {
    const bool processed = c.row_slot[r] >= 0 && r % 3 == 0;
    int64_t untouched = 0;
    for (int64_t v = 0; v < c.vocab; ++v) {
      uint32_t bits;
      std::memcpy(&bits, &after.processed[r * c.vocab + v], sizeof(bits));
      untouched += bits == 0xffffffffu;
    }
    EXPECT_EQ(untouched, processed ? 0 : c.vocab) << describe(c, r);
    if (c.row_slot[r] >= 0 && r % 3 == 1) {  // greedy on the raw row
      EXPECT_EQ(got.tokens[r], top_ids(c, r, 1)[0]) << describe(c, r);
    }
  }
  EXPECT_EQ(first_difference(got.state, initial_state(c)), -1) << "an unpenalized row written";
}

TEST(SamplerPenaltiesCuda, SampledLogprobsMatchCpuForEveryRequestedCount) {
  SKIP_WITHOUT_CUDA();
  Case c = penalties_case(24, 5);
  const int32_t counts[] = {-1, 0, 5, 20, kernels::kMaxLogprobs, 1};
  for (size_t s = 0; s < c.slots.size(); ++s) c.slots[s].num_logprobs = counts[s % 6];
  const Out got = expect_same_as_cpu(c);
  int listed = 0, skipped = 0;
  for (int64_t r = 0; r < c.rows(); ++r) {
    const int32_t n = c.row_slot[r] < 0 ? -1 : c.slots[c.row_slot[r]].num_logprobs;
    if (n < 0) {
      skipped += got.rank[r] == kUnwritten;
      continue;
    }
    EXPECT_GE(got.rank[r], 1) << describe(c, r);
    for (int64_t j = 0; j < kTopWidth; ++j)
      listed += j < n ? got.top_ids[r * kTopWidth + j] >= 0 : got.top_ids[r * kTopWidth + j] == -1;
  }
  EXPECT_GT(skipped, 0);
  EXPECT_GT(listed, 0);
}

TEST(SamplerPenaltiesCuda, RowsSharingAPenalizedSlotBothCountAndCountsSaturate) {
  SKIP_WITHOUT_CUDA();
  Case c;
  Slot s{0.0f};
  s.frequency = 1.0f;
  c.add(s, 4);
  c.add(s, 4);
  c.row_slot = {0, 0, 1};  // slot 0 twice: both rows see count 0 and draw the same token
  c.positions = {4, 5, 4};
  c.fill_normal(6);
  std::copy_n(c.row(0), c.vocab, c.row(1));
  c.token_state.assign(2 * c.vocab, 0);
  const int32_t top1 = top_ids(c, 2, 1)[0];
  c.token_state[c.vocab + top1] = kTokenInPrompt | kTokenCountMax;  // saturated
  c.slots[1].repetition = 1.0001f;
  c.slots[1].frequency = 0.0f;
  const Out got = expect_same_as_cpu(c);
  EXPECT_EQ(got.tokens[0], got.tokens[1]);
  EXPECT_EQ(got.state[got.tokens[0]], 2);
  ASSERT_EQ(got.tokens[2], top1);
  EXPECT_EQ(got.state[c.vocab + top1], kTokenInPrompt | kTokenCountMax);
}

TEST(SamplerPenaltiesCuda, ScatterTokenStateMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  const int64_t n = 5, v = kVocab;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> slot(0, n - 1), id(0, v - 1), state(0, 0xffff);
  std::vector<int32_t> entries;  // [E, 3], distinct (slot, id) so the order does not matter
  std::vector<char> used(n * v, 0);
  while (entries.size() < 3 * 4000) {
    const int32_t s = slot(rng), t = id(rng);
    if (used[s * v + t]++) continue;
    entries.insert(entries.end(), {s, t, state(rng)});
  }
  const int64_t e = static_cast<int64_t>(entries.size() / 3);
  std::vector<uint16_t> host(n * v, 0x0101);
  DevVec<uint16_t> dev(host);
  DevVec<int32_t> dev_entries(entries);
  kernels::cpu::scatter_token_state(host_view(host.data(), DType::kU16, {n, v}),
                                    host_view(entries.data(), DType::kI32, {e, 3}));
  kernels::cuda::scatter_token_state(dev.view(DType::kU16, {n, v}),
                                     dev_entries.view(DType::kI32, {e, 3}), nullptr);
  CUDA_CHECK(cudaGetLastError());
  EXPECT_EQ(first_difference(dev.host(), host), -1);
  EXPECT_NE(host, std::vector<uint16_t>(n * v, 0x0101));
}

}  // namespace
}  // namespace nanovllm::test
