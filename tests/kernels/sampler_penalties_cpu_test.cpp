// Rule P of the CPU reference sampler (kernels/sampler.h) against hand-computed values of
// vLLM's documented formulas (logit_bias added first; repetition: x / p when x > 0 else x * p
// for a token in the prompt or generated; frequency: minus count * f; presence: minus p once
// for a generated token), the token_state update after the draw, the processed rows it writes
// (and the ones it leaves), and the sampled token's logprobs on the raw row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "kernels/sampler.h"
#include "kernels/sampler_math.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

using kernels::kTokenCountMax;
using kernels::kTokenInPrompt;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kWidth = kernels::kMaxLogprobs;

struct Slot {
  float temperature = 0.0f;  // greedy unless set
  int32_t top_k = -1;
  float top_p = 1.0f;
  uint64_t seed = 0;
  float repetition = 1.0f, presence = 0.0f, frequency = 0.0f;
  std::vector<std::pair<int32_t, float>> bias;  // (id, value)
  int32_t min_tokens_position = 0;
  std::vector<int32_t> masked;
  int32_t num_logprobs = -1;
};

struct Call {
  int64_t vocab = 0;
  std::vector<Slot> slots;                   // [N]
  std::vector<int32_t> row_slot, positions;  // [B], row_slot < 0 = padding
  std::vector<float> logits;                 // [B, V]
  std::vector<uint16_t> token_state;         // [N, V], zeros when empty
  bool with_processed = true;
  int64_t rows() const { return static_cast<int64_t>(row_slot.size()); }
};

struct Result {
  std::vector<int32_t> tokens;         // [B]
  std::vector<float> processed;        // [B, V], NaN where unwritten
  std::vector<uint16_t> token_state;   // [N, V]
  std::vector<float> logits_after;     // [B, V]
  std::vector<float> logprob;          // [B], 99 where unwritten
  std::vector<int32_t> rank, top_ids;  // [B], [B, kWidth], -7 where unwritten
  std::vector<float> top_logprobs;     // [B, kWidth]
};

Result run(Call c) {
  const int64_t b = c.rows(), n = static_cast<int64_t>(c.slots.size()), v = c.vocab;
  std::vector<float> t, p, mp, rep, pres, freq, bias_values;
  std::vector<int32_t> k, min_pos, masked, bias_count, bias_ids, num_logprobs;
  std::vector<int64_t> seeds;
  int64_t width = 1, bias_width = 1;
  for (const Slot& s : c.slots) {
    width = std::max(width, static_cast<int64_t>(s.masked.size()));
    bias_width = std::max(bias_width, static_cast<int64_t>(s.bias.size()));
  }
  for (const Slot& s : c.slots) {
    t.push_back(s.temperature);
    k.push_back(s.top_k);
    p.push_back(s.top_p);
    mp.push_back(0.0f);
    seeds.push_back(static_cast<int64_t>(s.seed));
    rep.push_back(s.repetition);
    pres.push_back(s.presence);
    freq.push_back(s.frequency);
    min_pos.push_back(s.min_tokens_position);
    num_logprobs.push_back(s.num_logprobs);
    masked.insert(masked.end(), s.masked.begin(), s.masked.end());
    masked.resize(masked.size() + static_cast<size_t>(width) - s.masked.size(), -1);
    bias_count.push_back(static_cast<int32_t>(s.bias.size()));
    for (int64_t j = 0; j < bias_width; ++j) {
      const bool used = j < static_cast<int64_t>(s.bias.size());
      bias_ids.push_back(used ? s.bias[j].first : -1);
      bias_values.push_back(used ? s.bias[j].second : 0.0f);
    }
  }
  Result r;
  r.tokens.assign(b, -7);
  r.processed.assign(b * v, std::numeric_limits<float>::quiet_NaN());
  r.token_state = c.token_state.empty() ? std::vector<uint16_t>(n * v, 0) : c.token_state;
  r.logprob.assign(b, 99.0f);
  r.rank.assign(b, -7);
  r.top_ids.assign(b * kWidth, -7);
  r.top_logprobs.assign(b * kWidth, 99.0f);
  kernels::SamplingBatch batch{
      .logits = test::view(c.logits, {b, v}),
      .slots = test::view(c.row_slot, {b}),
      .positions = test::view(c.positions, {b}),
      .params = {test::view(t, {n}), test::view(k, {n}), test::view(p, {n}), test::view(mp, {n}),
                 test::view(seeds, {n}), test::view(min_pos, {n}), test::view(masked, {n, width}),
                 test::view(rep, {n}), test::view(pres, {n}), test::view(freq, {n}),
                 TensorView(r.token_state.data(), DType::kU16, {n, v}), test::view(bias_count, {n}),
                 test::view(bias_ids, {n, bias_width}), test::view(bias_values, {n, bias_width}),
                 test::view(num_logprobs, {n})},
      .processed = c.with_processed ? test::view(r.processed, {b, v}) : TensorView(),
      .out_tokens = test::view(r.tokens, {b}),
      .logprobs = {test::view(r.logprob, {b}), test::view(r.rank, {b}),
                   test::view(r.top_ids, {b, kWidth}), test::view(r.top_logprobs, {b, kWidth})}};
  kernels::cpu::sample(batch);
  r.logits_after = c.logits;
  return r;
}

// One greedy row per slot, all over the same logits, at position 5.
Call rows_over(const std::vector<float>& logits, const std::vector<Slot>& slots) {
  Call c;
  c.vocab = static_cast<int64_t>(logits.size());
  c.slots = slots;
  for (size_t s = 0; s < slots.size(); ++s) {
    c.row_slot.push_back(static_cast<int32_t>(s));
    c.positions.push_back(5);
    c.logits.insert(c.logits.end(), logits.begin(), logits.end());
  }
  return c;
}

std::vector<float> row_of(const std::vector<float>& m, int64_t r, int64_t v) {
  return {m.begin() + r * v, m.begin() + (r + 1) * v};
}

TEST(SamplerPenaltiesCpu, ProcessedRowAddsTheBiasThenAppliesRepetitionFrequencyAndPresence) {
  const std::vector<float> x{2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f, 0.25f, -0.5f};
  Slot s;
  s.repetition = 2.0f;
  s.presence = 0.5f;
  s.frequency = 0.25f;
  s.bias = {{3, 1.5f}, {5, -3.0f}, {7, 2.0f}};
  Call c = rows_over(x, {s});
  // Prompt bits and generated counts per token.
  c.token_state = {kTokenInPrompt, kTokenInPrompt | 2, 1, 0, 3, kTokenInPrompt, 0, 1};
  const Result r = run(c);
  // By hand: 0: 2 / 2; 1: -1 * 2 - 2 * 0.25 - 0.5; 2: 0.5 / 2 - 0.25 - 0.5; 3: 3 + 1.5;
  // 4: -2 * 2 - 3 * 0.25 - 0.5; 5: (1 - 3) * 2; 6: untouched; 7: (-0.5 + 2) / 2 - 0.25 - 0.5.
  EXPECT_EQ(r.processed,
            (std::vector<float>{1.0f, -3.0f, -0.5f, 4.5f, -5.25f, -4.0f, 0.25f, 0.0f}));
  EXPECT_EQ(r.logits_after, x);  // the logits row is never written
  EXPECT_EQ(r.tokens[0], 3);
  EXPECT_EQ(r.token_state[3], 1);  // the drawn token counted once
}

TEST(SamplerPenaltiesCpu, RepetitionPenaltyBelowOneRaisesRepeatedTokensOfEitherSign) {
  const std::vector<float> x{1.0f, 2.0f, -4.0f, 1.5f};
  Slot s;
  s.repetition = 0.5f;
  Call c = rows_over(x, {s, Slot{}});
  c.token_state.assign(2 * 4, 0);
  c.token_state[0] = c.token_state[2] = kTokenInPrompt;
  const Result r = run(c);
  EXPECT_EQ(row_of(r.processed, 0, 4), (std::vector<float>{2.0f, 2.0f, -2.0f, 1.5f}));
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0, 1}));  // ties with token 1: the lower id wins
}

// Greedy steps over the same logits: the tokens drawn as the state grows.
std::vector<int32_t> greedy_steps(const Slot& s, const std::vector<float>& x, int steps) {
  Call c = rows_over(x, {s});
  std::vector<int32_t> tokens;
  for (int i = 0; i < steps; ++i) {
    const Result r = run(c);
    tokens.push_back(r.tokens[0]);
    c.token_state = r.token_state;
    ++c.positions[0];
  }
  return tokens;
}

TEST(SamplerPenaltiesCpu, FrequencyPenaltyGrowsWithEachRepeatUntilTheRunnerUpWins) {
  // 5 - 0.6 * count against 4 - 0.6 * count: 5, 4.4 win; 3.8 loses to 4; 3.8 beats 3.4; ...
  Slot s;
  s.frequency = 0.6f;
  EXPECT_EQ(greedy_steps(s, {5.0f, 4.0f, 0.0f}, 6), (std::vector<int32_t>{0, 0, 1, 0, 1, 0}));
}

TEST(SamplerPenaltiesCpu, PresencePenaltyIsSubtractedOnceWhateverTheCount) {
  Slot s;
  s.presence = 0.5f;  // 5 - 0.5 stays above 4 however often token 0 repeats
  EXPECT_EQ(greedy_steps(s, {5.0f, 4.0f, 0.0f}, 5), (std::vector<int32_t>(5, 0)));
  s.presence = 1.5f;  // 3.5 < 4, then 4 - 1.5 < 3.5
  EXPECT_EQ(greedy_steps(s, {5.0f, 4.0f, 0.0f}, 4), (std::vector<int32_t>{0, 1, 0, 0}));
}

TEST(SamplerPenaltiesCpu, TokenStateCountsDrawsOnlyForPenalizedSlotsAndSaturates) {
  std::vector<float> x(16, 0.0f);
  x[9] = 10.0f;  // every slot draws 9
  Slot penalized;
  penalized.repetition = 1.2f;
  Call c = rows_over(x, {penalized, Slot{}, penalized});
  c.token_state.assign(3 * 16, 0);
  c.token_state[0 * 16 + 9] = kTokenInPrompt | 5;
  std::fill(c.token_state.begin() + 16, c.token_state.begin() + 32, 0x1234);  // off: untouched
  c.token_state[2 * 16 + 9] = kTokenInPrompt | kTokenCountMax;
  const Result r = run(c);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{9, 9, 9}));
  EXPECT_EQ(r.token_state[0 * 16 + 9], kTokenInPrompt | 6);
  EXPECT_EQ(r.token_state[2 * 16 + 9], kTokenInPrompt | kTokenCountMax);  // saturated
  std::vector<uint16_t> want = c.token_state;
  want[9] = kTokenInPrompt | 6;
  EXPECT_EQ(r.token_state, want);  // nothing else changed, the unpenalized row included
}

TEST(SamplerPenaltiesCpu, RowsSharingAPenalizedSlotSeeTheStateFromBeforeTheCallAndBothCount) {
  // Sequential updates would give the second row 3 - 1 < 2.5: token 1. Both see count 0.
  Slot s;
  s.frequency = 1.0f;
  Call c = rows_over({3.0f, 2.5f, 0.0f}, {s});
  c.row_slot = {0, 0};
  c.positions = {5, 6};
  c.logits.insert(c.logits.end(), c.logits.begin(), c.logits.end());
  const Result r = run(c);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(r.token_state[0], 2);
}

std::vector<float> normal_logits(int64_t v, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> x(v);  // [V]
  for (float& e : x) e = d(rng);
  return x;
}

TEST(SamplerPenaltiesCpu, BiasOfPlus100MakesALowTokenTheChoiceAndMinus100RemovesTheArgmax) {
  const auto x = normal_logits(50, 2.0f, 1);
  std::vector<int32_t> order(50);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  const int32_t top = order[0], second = order[1], low = order[49];
  Slot down, up;
  down.bias = {{top, -100.0f}};
  up.bias = {{low, 100.0f}};
  EXPECT_EQ(run(rows_over(x, {down, up})).tokens, (std::vector<int32_t>{second, low}));
  // Sampled with Qwen3's filters, every seed draws the boosted token.
  std::vector<Slot> sampled;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Slot s{0.6f, 20, 0.95f, seed};
    s.bias = {{low, 100.0f}};
    sampled.push_back(s);
  }
  for (int32_t t : run(rows_over(x, sampled)).tokens) EXPECT_EQ(t, low);
}

TEST(SamplerPenaltiesCpu, MinTokensMaskOverridesAPositiveBiasAndThePenalties) {
  std::vector<float> x(20, 0.0f);
  x[4] = 1.0f;
  Slot s;
  s.bias = {{7, 100.0f}};
  s.repetition = 0.5f;  // would double token 7's 100
  s.min_tokens_position = 10;
  s.masked = {7, -1};
  Call c = rows_over(x, {s, s});
  c.positions = {8, 9};  // draws tokens 9 (masked) and 10 (free)
  c.token_state.assign(2 * 20, 0);
  c.token_state[7] = c.token_state[20 + 7] = kTokenInPrompt;
  const Result r = run(c);
  EXPECT_EQ(r.processed[7], -kInf);
  EXPECT_EQ(r.processed[20 + 7], 200.0f);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{4, 7}));
}

TEST(SamplerPenaltiesCpu, UnprocessedRowsReadTheRawLogitsAndLeaveTheirProcessedRowsUnwritten) {
  const auto x = normal_logits(40, 2.0f, 2);
  const int32_t argmax = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
  Slot biased;
  biased.bias = {{argmax, -50.0f}};
  Slot refill;  // a stale mask whose position has passed: not processed
  refill.min_tokens_position = 3;
  refill.masked = {argmax};
  Call c = rows_over(x, {Slot{}, biased, refill});
  c.row_slot = {0, 1, -1, 2};
  c.positions.push_back(5);
  c.logits.insert(c.logits.end(), x.begin(), x.end());
  const Result r = run(c);
  EXPECT_EQ(r.tokens[0], argmax);
  EXPECT_NE(r.tokens[1], argmax);
  EXPECT_EQ(r.tokens[2], 0);
  EXPECT_EQ(r.tokens[3], argmax);
  for (int64_t row : {0, 2, 3})
    for (float e : row_of(r.processed, row, 40)) EXPECT_TRUE(std::isnan(e)) << "row " << row;
  EXPECT_EQ(row_of(r.processed, 1, 40)[argmax], x[argmax] - 50.0f);
  // Without a processed buffer (a copy per row) the same tokens.
  c.with_processed = false;
  EXPECT_EQ(run(c).tokens, r.tokens);
}

// log_softmax(x)[t] in long double.
double log_softmax(const std::vector<float>& x, int32_t t) {
  long double mx = *std::max_element(x.begin(), x.end()), sum = 0;
  for (float e : x) sum += std::exp(static_cast<long double>(e) - mx);
  return static_cast<double>(static_cast<long double>(x[t]) - mx - std::log(sum));
}

TEST(SamplerPenaltiesCpu, SampledTokenLogprobsAreTheRawLogSoftmaxEvenForABiasedRow) {
  const auto x = normal_logits(64, 2.0f, 3);
  std::vector<int32_t> order(64);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  Slot boosted;
  boosted.bias = {{order[63], 100.0f}};
  boosted.num_logprobs = 3;
  Slot plain;
  plain.num_logprobs = 0;
  Slot none;  // num_logprobs -1: nothing written
  Call c = rows_over(x, {boosted, plain, none});
  c.row_slot.push_back(-1);
  c.positions.push_back(5);
  c.logits.insert(c.logits.end(), x.begin(), x.end());
  const Result r = run(c);
  ASSERT_EQ(r.tokens[0], order[63]);
  EXPECT_NEAR(r.logprob[0], log_softmax(x, order[63]), 1e-5);  // raw: the bias not in it
  EXPECT_EQ(r.rank[0], 64);
  EXPECT_EQ(std::vector<int32_t>(r.top_ids.begin(), r.top_ids.begin() + 4),
            (std::vector<int32_t>{order[0], order[1], order[2], -1}));
  EXPECT_NEAR(r.top_logprobs[1], log_softmax(x, order[1]), 1e-5);
  EXPECT_EQ(r.tokens[1], order[0]);
  EXPECT_NEAR(r.logprob[1], log_softmax(x, order[0]), 1e-5);
  EXPECT_EQ(r.rank[1], 1);
  EXPECT_EQ(r.top_ids[kWidth], -1);
  for (int64_t row : {2, 3}) {
    EXPECT_EQ(r.logprob[row], 99.0f) << "row " << row;
    EXPECT_EQ(r.rank[row], -7) << "row " << row;
    EXPECT_EQ(r.top_ids[row * kWidth], -7) << "row " << row;
  }
}

TEST(SamplerPenaltiesCpu, ScatterTokenStateWritesEachEntryAndNothingElse) {
  std::vector<uint16_t> state(3 * 10, 7);                             // [N, V]
  std::vector<int32_t> entries{0, 4, 0x8001, 2, 9, 0, 2, 0, 0xffff};  // [E, 3]
  kernels::cpu::scatter_token_state(TensorView(state.data(), DType::kU16, {3, 10}),
                                    test::view(entries, {3, 3}));
  std::vector<uint16_t> want(3 * 10, 7);
  want[4] = 0x8001;
  want[29] = 0;
  want[20] = 0xffff;
  EXPECT_EQ(state, want);
}

}  // namespace
}  // namespace nanovllm
