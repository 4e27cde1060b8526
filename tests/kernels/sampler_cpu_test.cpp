// The CPU reference sampler (kernels/sampler.h's rules): the distribution each filter leaves,
// the tie rules at every cut, what counts as "no filter", and the batch plumbing (per-slot
// parameters, per-row slot and position, padding rows, last_tokens, row_passes).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "kernels/sampler.h"
#include "kernels/sampler_math.h"
#include "tests/kernels/cpu_test_util.h"

namespace nanovllm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// One slot's parameters.
struct Slot {
  float temperature = 1.0f;
  int32_t top_k = -1;
  float top_p = 1.0f;
  float min_p = 0.0f;
  uint64_t seed = 0;
  // min_tokens (rule P): rows whose position + 1 < min_tokens_position cannot draw `masked`.
  int32_t min_tokens_position = 0;
  std::vector<int32_t> masked;
};

// One call: N slots, B rows over a [B, ld] logits buffer whose first `vocab` columns are
// the row's logits.
struct Call {
  std::vector<Slot> slots;         // [N]
  std::vector<int32_t> row_slot;   // [B], < 0 = padding
  std::vector<int32_t> positions;  // [B], of the row's input token
  std::vector<float> logits;       // [B, ld]
  int64_t vocab = 0, ld = 0;
  std::vector<int32_t> last_tokens;  // [N] before the call; empty = none given
};
struct Result {
  std::vector<int32_t> tokens, last_tokens, passes;  // [B], [N], [B]
};

// logits_after: where the logits buffer goes after the call (to see what the sampler wrote).
Result run(Call c, std::vector<float>* logits_after = nullptr) {
  const int64_t b = static_cast<int64_t>(c.row_slot.size()),
                n = static_cast<int64_t>(c.slots.size());
  std::vector<float> t, p, mp;  // [N]
  std::vector<int32_t> k;       // [N]
  std::vector<int64_t> seeds;   // [N]
  Result r{std::vector<int32_t>(b, -7), c.last_tokens, std::vector<int32_t>(b, -7)};
  // min_tokens views only when some slot has a mask: [N] positions, [N, width] ids padded -1.
  std::vector<int32_t> min_position, masked;
  int64_t width = 0;
  bool any_mask = false;
  for (const Slot& s : c.slots) {
    t.push_back(s.temperature);
    k.push_back(s.top_k);
    p.push_back(s.top_p);
    mp.push_back(s.min_p);
    seeds.push_back(static_cast<int64_t>(s.seed));
    min_position.push_back(s.min_tokens_position);
    width = std::max(width, static_cast<int64_t>(s.masked.size()));
    any_mask = any_mask || s.min_tokens_position != 0 || !s.masked.empty();
  }
  width = std::max<int64_t>(width, 1);
  for (const Slot& s : c.slots) {
    masked.insert(masked.end(), s.masked.begin(), s.masked.end());
    masked.resize(masked.size() + static_cast<size_t>(width) - s.masked.size(), -1);
  }
  TensorView logits = test::view(c.logits, {b, c.ld});
  logits.shape[1] = c.vocab;  // a view of the first vocab columns: rows strided by ld
  kernels::SamplingBatch batch{
      .logits = logits,
      .slots = test::view(c.row_slot, {b}),
      .positions = test::view(c.positions, {b}),
      .params = {test::view(t, {n}), test::view(k, {n}), test::view(p, {n}), test::view(mp, {n}),
                 test::view(seeds, {n}), any_mask ? test::view(min_position, {n}) : TensorView(),
                 any_mask ? test::view(masked, {n, width}) : TensorView()},
      .out_tokens = test::view(r.tokens, {b}),
      .last_tokens = r.last_tokens.empty() ? TensorView() : test::view(r.last_tokens, {n}),
      .row_passes = test::view(r.passes, {b})};  // no processed buffer: rule P on a copy
  kernels::cpu::sample(batch);
  if (logits_after) *logits_after = c.logits;
  return r;
}

// Row i uses slot i with the given parameters at the given position; all rows see `logits`.
struct Row {
  Slot slot;
  int32_t position = 0;
};
std::vector<int32_t> sample_rows(const std::vector<float>& logits, const std::vector<Row>& rows) {
  Call c;
  c.vocab = c.ld = static_cast<int64_t>(logits.size());
  for (const Row& r : rows) {
    c.row_slot.push_back(static_cast<int32_t>(c.slots.size()));
    c.slots.push_back(r.slot);
    c.positions.push_back(r.position);
    c.logits.insert(c.logits.end(), logits.begin(), logits.end());
  }
  return run(std::move(c)).tokens;
}

// Rows that differ only in seed: the empirical distribution over many seeds.
std::vector<double> frequencies(const std::vector<float>& logits, Slot proto, int n,
                                int32_t position = 0) {
  std::vector<Row> rows(n, Row{proto, position});
  for (int i = 0; i < n; ++i) rows[i].slot.seed = 1000003ull * i + 17;
  std::vector<double> freq(logits.size(), 0.0);
  for (int32_t t : sample_rows(logits, rows)) freq.at(t) += 1.0 / n;
  return freq;
}

// The tokens ever drawn over n seeds: the candidate set, once n makes a miss improbable.
std::set<int32_t> support(const std::vector<float>& logits, Slot proto, int n = 400) {
  std::set<int32_t> s;
  const auto freq = frequencies(logits, proto, n);
  for (size_t i = 0; i < freq.size(); ++i)
    if (freq[i] > 0) s.insert(static_cast<int32_t>(i));
  return s;
}

// The same seeds with and without a setting: equal tokens mean the setting filtered nothing.
void expect_same_draws(const std::vector<float>& logits, Slot a, Slot b, const char* what) {
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    a.seed = b.seed = seed;
    const auto got = sample_rows(logits, {Row{a, 5}, Row{b, 5}});
    EXPECT_EQ(got[0], got[1]) << what << ", seed " << seed;
  }
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

std::vector<float> normal_logits(int64_t v, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> l(v);  // [V]
  for (float& x : l) x = dist(rng);
  return l;
}

TEST(SamplerCpu, ZeroTemperatureIsArgmaxWithLowestIndexOnTies) {
  const std::vector<float> logits{0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  EXPECT_EQ(
      sample_rows(logits, {Row{{0.0f, -1, 1.0f, 0.0f, 1}, 0}, Row{{0.0f, 2, 0.5f, 0.0f, 9}, 4}}),
      (std::vector<int32_t>{1, 1}));
}

TEST(SamplerCpu, TinyTemperaturesSampleAsTheMinimumTemperatureNotGarbage) {
  // Logits near 256 (as the random models give) over 1e-38 overflow to inf: every token would
  // tie. Raised to 0.01, the rows draw exactly what temperature 0.01 draws.
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 250.0f + 0.1f * static_cast<float>(i % 7);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::vector<int32_t> got = sample_rows(
        logits, {Row{{1e-45f, -1, 1.0f, 0.0f, seed}, 3}, Row{{1e-38f, 20, 0.95f, 0.0f, seed}, 3},
                 Row{{0.01f, -1, 1.0f, 0.0f, seed}, 3}, Row{{0.01f, 20, 0.95f, 0.0f, seed}, 3}});
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
    Slot proto;
    proto.temperature = t;
    expect_matches(frequencies(logits, proto, n, 7), softmax(logits, t), n);
  }
}

TEST(SamplerCpu, TopKKeepsOnlyTheKLargestRenormalized) {
  const std::vector<float> logits{1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f};
  const int n = 30000;
  Slot proto;
  proto.top_k = 2;
  // Tokens 2 and 5 only, in ratio e^2 : e^1.5.
  const double p2 = 1.0 / (1.0 + std::exp(-0.5));
  expect_matches(frequencies(logits, proto, n), {0, 0, p2, 0, 0, 1 - p2}, n);
}

TEST(SamplerCpu, TopKTieAtTheKthValueKeepsTheLowerIds) {
  // Order: id 6 (4.0), then ids 1, 3, 4, 7 tied at 3.0. top_k 3 cuts inside the tie: the
  // lower ids 1 and 3 stay, 4 and 7 go, whatever the temperature.
  const std::vector<float> logits{0.0f, 3.0f, -1.0f, 3.0f, 3.0f, 1.0f, 4.0f, 3.0f};
  for (float t : {1.0f, 0.6f, 3.0f}) {
    Slot s;
    s.temperature = t;
    s.top_k = 3;
    EXPECT_EQ(support(logits, s), (std::set<int32_t>{1, 3, 6})) << "t " << t;
  }
}

TEST(SamplerCpu, TopPKeepsSmallestPrefixReachingTheMass) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p = 0.75 keeps {0, 1} (0.5 < 0.75 <= 0.8).
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  const int n = 30000;
  Slot proto;
  proto.top_p = 0.75f;
  expect_matches(frequencies(logits, proto, n), {0.625, 0.375, 0, 0}, n);
}

TEST(SamplerCpu, TopPStopsAtTheElementWhoseMassReachesTheTargetExactly) {
  // Four tokens at the maximum (mass 2^40 each, ids 1, 3, 4, 6) and four with zero mass (more
  // than 88 below): top_p 0.5 makes the target exactly 2 * 2^40, reached at the second tied
  // token, so the shortest prefix with mass >= target is {1, 3}. One float more and the target
  // passes it: three tokens. The tie itself is cut by id.
  const std::vector<float> logits{-100.0f, 2.0f, -100.0f, 2.0f, 2.0f, -100.0f, 2.0f, -100.0f};
  const uint64_t unit = kernels::sampler_mass(0.0f), total = 4 * unit;
  ASSERT_EQ(kernels::sampler_mass(-102.0f), 0u);
  ASSERT_EQ(kernels::top_p_target(0.5f, total), 2 * unit);
  ASSERT_GT(kernels::top_p_target(std::nextafter(0.5f, 1.0f), total), 2 * unit);
  ASSERT_EQ(kernels::top_p_target(0.75f, total), 3 * unit);
  const std::map<float, std::set<int32_t>> want{
      {0.25f, {1}},       {std::nextafter(0.5f, 0.0f), {1, 3}},
      {0.5f, {1, 3}},     {std::nextafter(0.5f, 1.0f), {1, 3, 4}},
      {0.75f, {1, 3, 4}}, {0.999f, {1, 3, 4, 6}}};
  for (const auto& [p, kept] : want) {
    Slot s;
    s.top_p = p;
    EXPECT_EQ(support(logits, s), kept) << "top_p " << p;
  }
}

TEST(SamplerCpu, MinPDropsTokensBelowFractionOfTheMaximum) {
  // min_p = 0.2 -> threshold 0.1: keeps 0.5, 0.3, 0.15 and drops 0.05.
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  const int n = 30000;
  Slot proto;
  proto.min_p = 0.2f;
  expect_matches(frequencies(logits, proto, n), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, n);
}

TEST(SamplerCpu, TopKAtLeastVocabOrNotPositiveFiltersNothing) {
  const auto logits = normal_logits(300, 2.0f, 3);
  Slot plain;
  plain.temperature = 0.8f;
  for (int32_t k : {300, 301, 1 << 30, 0, -1, -20}) {
    Slot s = plain;
    s.top_k = k;
    expect_same_draws(logits, plain, s, "top_k");
  }
  // ...while a k below V does cut (so the comparison above can tell).
  Slot cut = plain;
  cut.top_k = 1;
  EXPECT_EQ(support(logits, cut).size(), 1u);
}

TEST(SamplerCpu, TopPOfOneAndMinPOfZeroFilterNothing) {
  const auto logits = normal_logits(300, 2.0f, 4);
  Slot plain;
  plain.temperature = 1.2f;
  for (float p : {1.0f, 1.5f}) {
    Slot s = plain;
    s.top_p = p;
    expect_same_draws(logits, plain, s, "top_p");
  }
  for (float mp : {0.0f, -0.0f, -0.5f}) {
    Slot s = plain;
    s.min_p = mp;
    expect_same_draws(logits, plain, s, "min_p");
  }
}

TEST(SamplerCpu, PaddingRowsGiveZeroAndWriteNoSlot) {
  Call c;
  c.vocab = c.ld = 50;
  c.logits = normal_logits(4 * 50, 1.0f, 5);
  c.slots = {Slot{0.7f, 10, 0.9f, 0.0f, 1}, Slot{0.0f}, Slot{1.0f, -1, 1.0f, 0.0f, 2}};
  c.row_slot = {-1, 0, -1, 1};
  c.positions = {3, 4, 5, 6};
  c.last_tokens = {-5, -5, -5};  // [N]
  // Padding rows hold logits that would win any draw: a row that ignored the slot shows.
  c.logits[0 * 50 + 17] = c.logits[2 * 50 + 17] = 1e4f;
  const Result r = run(c);
  EXPECT_EQ(r.tokens[0], 0);
  EXPECT_EQ(r.tokens[2], 0);
  EXPECT_EQ(r.last_tokens, (std::vector<int32_t>{r.tokens[1], r.tokens[3], -5}));
  EXPECT_EQ(r.passes, (std::vector<int32_t>{0, 1, 0, 1}));
}

TEST(SamplerCpu, LastTokensGetsEachLiveRowsTokenAtItsSlot) {
  // Rows name their slots out of order; slots 1 and 4 have no row and keep their value.
  Call c;
  c.vocab = c.ld = 40;
  c.logits = normal_logits(3 * 40, 2.0f, 6);
  for (uint64_t i = 0; i < 5; ++i) c.slots.push_back(Slot{0.9f, 8, 0.95f, 0.0f, 100 + i});
  c.row_slot = {3, 0, 2};
  c.positions = {10, 20, 30};
  c.last_tokens = {-5, -5, -5, -5, -5};
  const Result r = run(c);
  EXPECT_EQ(r.last_tokens, (std::vector<int32_t>{r.tokens[1], -5, r.tokens[2], r.tokens[0], -5}));
  // Without a last_tokens buffer the tokens are the same.
  c.last_tokens.clear();
  EXPECT_EQ(run(c).tokens, r.tokens);
}

TEST(SamplerCpu, RowsSharingASlotDrawByTheirOwnPosition) {
  // Rows 0 and 1 share slot 0's parameters and seed at positions 8 and 9: each draws what a
  // call with only that row draws, and the two draws are not tied to each other.
  const auto logits = normal_logits(500, 0.5f, 7);
  int same = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Call c;
    c.vocab = c.ld = 500;
    c.slots = {Slot{1.0f, 100, 0.95f, 0.0f, seed}};
    c.row_slot = {0, 0};
    c.positions = {8, 9};
    c.logits = logits;
    c.logits.insert(c.logits.end(), logits.begin(), logits.end());
    const Result both = run(c);
    for (int i = 0; i < 2; ++i) {
      Call alone = c;
      alone.row_slot = {0};
      alone.positions = {c.positions[i]};
      alone.logits.resize(500);
      EXPECT_EQ(run(alone).tokens[0], both.tokens[i]) << "seed " << seed << " row " << i;
    }
    same += both.tokens[0] == both.tokens[1];
  }
  EXPECT_LT(same, 5);  // 100 near-uniform candidates: a shared draw would make all 40 equal
}

TEST(SamplerCpu, NegativeAndPositiveZeroOrderAsEqualSoTheIdDecides) {
  // -0 at id 1 before +0 at ids 2 and 3: equal logits, so id 1 comes first in every rule.
  const std::vector<float> logits{-1.0f, -0.0f, 0.0f, 0.0f, -2.0f};
  Slot k1;
  k1.top_k = 1;
  EXPECT_EQ(support(logits, k1), (std::set<int32_t>{1}));
  Slot k2;
  k2.top_k = 2;
  k2.temperature = 0.6f;
  EXPECT_EQ(support(logits, k2), (std::set<int32_t>{1, 2}));
  Slot p;  // masses 1, 1, 1, e^-1, e^-2 (total 3.5): 0.25 of that is reached at the first token
  p.top_p = 0.25f;
  EXPECT_EQ(support(logits, p), (std::set<int32_t>{1}));
  EXPECT_EQ(sample_rows(logits, {Row{Slot{0.0f}, 0}})[0], 1);  // greedy: the lowest id
}

TEST(SamplerCpu, StridedLogitsRowsSampleAsContiguousOnes) {
  // A [3, 70] buffer viewed as [3, 64]: the 6 extra columns (huge) must never be read.
  const int64_t v = 64, ld = 70;
  const auto dense = normal_logits(3 * v, 2.0f, 8);
  Call strided;
  strided.vocab = v;
  strided.ld = ld;
  strided.logits.assign(3 * ld, 1e4f);
  for (int64_t r = 0; r < 3; ++r)
    std::copy_n(dense.begin() + r * v, v, strided.logits.begin() + r * ld);
  strided.slots = {Slot{0.0f}, Slot{0.8f, -1, 1.0f, 0.0f, 3}, Slot{0.8f, 10, 0.9f, 0.05f, 4}};
  strided.row_slot = {0, 1, 2};
  strided.positions = {1, 2, 3};
  Call contiguous = strided;
  contiguous.ld = v;
  contiguous.logits = dense;
  EXPECT_EQ(run(strided).tokens, run(contiguous).tokens);
}

TEST(SamplerCpu, SameSeedAndPositionGiveSameTokenRegardlessOfBatch) {
  const auto logits = normal_logits(1000, 2.0f, 31);
  std::vector<Row> rows;
  for (int i = 0; i < 64; ++i)
    rows.push_back(
        Row{{0.8f, i % 3 == 0 ? 50 : -1, 0.95f, 0.0f, static_cast<uint64_t>(i / 4)}, i % 4});
  const auto together = sample_rows(logits, rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<Row> alone{rows[(i + 5) % rows.size()], rows[i]};
    EXPECT_EQ(sample_rows(logits, alone)[1], together[i]) << "row " << i;
  }
  // ...and the draw does change with the position (else sampling would repeat itself).
  std::map<int32_t, int> distinct;
  for (int pos = 0; pos < 50; ++pos)
    ++distinct[sample_rows(logits, {Row{{1.0f, -1, 1.0f, 0.0f, 3}, pos}})[0]];
  EXPECT_GT(distinct.size(), 5u);
}

TEST(SamplerCpu, MaskedTokensAreNeverDrawn) {
  // -inf logits (a masked vocabulary) have zero mass and -inf score under every filter; a
  // top_k larger than the unmasked count reaches into them and still never picks one.
  std::vector<float> logits(200, -kInf);
  for (int i = 0; i < 10; ++i) logits[7 + 19 * i] = 0.3f * static_cast<float>(i % 4);
  for (Slot s :
       {Slot{}, Slot{1.0f, 5}, Slot{1.0f, 50}, Slot{0.7f, -1, 0.9f}, Slot{1.0f, -1, 1.0f, 0.1f}})
    for (int32_t t : support(logits, s, 200)) EXPECT_NE(logits[t], -kInf) << "token " << t;
}

// min_tokens (rule P): a slot masking ids 7 and 11 until position 10 (tokens 0..9 cannot be
// them); its row draws for position + 1.
Slot min_tokens_slot(Slot s) {
  s.min_tokens_position = 10;
  s.masked = {7, -1, 11, 1000};  // -1 and ids past the vocabulary are padding
  return s;
}

TEST(SamplerCpu, MinTokensGreedyRowTakesTheNextBestUntilThePositionIsReached) {
  // Argmax 7 (masked), then 11 (masked), then 3.
  std::vector<float> logits(20, 0.0f);
  logits[7] = 9.0f;
  logits[11] = 8.0f;
  logits[3] = 5.0f;
  logits[4] = 5.0f;  // ties with 3: the lower id still wins among the unmasked
  const Slot greedy = min_tokens_slot(Slot{0.0f});
  std::vector<Row> rows;
  for (int32_t pos : {0, 7, 8, 9, 10, 30}) rows.push_back(Row{greedy, pos});
  // Positions 0..8 draw tokens 1..9 (< 10): masked; position 9 draws token 10: free.
  EXPECT_EQ(sample_rows(logits, rows), (std::vector<int32_t>{3, 3, 3, 7, 7, 7}));
}

TEST(SamplerCpu, MinTokensSampledRowNeverDrawsAMaskedIdEvenWhenItDominates) {
  // Ids 7 and 11 hold nearly all the mass; every filter, every seed: never drawn before the
  // position, and drawn nearly always once it is reached.
  std::vector<float> logits = normal_logits(64, 1.0f, 40);
  logits[7] = 30.0f;
  logits[11] = 29.0f;
  for (Slot kind : {Slot{1.0f}, Slot{1.0f, 1}, Slot{1.0f, 20, 0.95f}, Slot{0.7f, -1, 0.9f},
                    Slot{1.0f, -1, 1.0f, 0.5f}, Slot{2.0f, 3, 1.0f, 0.01f}}) {
    std::vector<Row> before, after;
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      kind.seed = seed;
      before.push_back(Row{min_tokens_slot(kind), 8});
      after.push_back(Row{min_tokens_slot(kind), 9});
    }
    int masked_after = 0;
    for (int32_t t : sample_rows(logits, before)) EXPECT_TRUE(t != 7 && t != 11) << "token " << t;
    for (int32_t t : sample_rows(logits, after)) masked_after += t == 7 || t == 11;
    EXPECT_GT(masked_after, 190) << "t " << kind.temperature << " k " << kind.top_k;
  }
}

TEST(SamplerCpu, MinTokensMaskDrawsWhatMinusInfinityLogitsDraw) {
  // The mask is exactly "those logits are -inf": the same seeds draw the same tokens as a row
  // whose masked logits were set to -inf by hand (and no mask).
  const auto logits = normal_logits(300, 2.0f, 41);
  auto by_hand = logits;
  by_hand[7] = by_hand[11] = -kInf;
  for (Slot kind : {Slot{0.0f}, Slot{1.0f}, Slot{0.6f, 20, 0.95f}, Slot{1.0f, -1, 0.5f, 0.05f}}) {
    for (uint64_t seed = 1; seed <= 32; ++seed) {
      kind.seed = seed;
      Call c;
      c.vocab = c.ld = 300;
      c.slots = {min_tokens_slot(kind), kind};
      c.row_slot = {0, 1};
      c.positions = {4, 4};
      c.logits = logits;
      c.logits.insert(c.logits.end(), by_hand.begin(), by_hand.end());
      const Result r = run(c);
      EXPECT_EQ(r.tokens[0], r.tokens[1]) << "t " << kind.temperature << " seed " << seed;
    }
  }
}

TEST(SamplerCpu, MinTokensMasksOnlyItsOwnSlotAndLeavesTheLogitsAsTheyWere) {
  std::vector<float> row(20, 0.0f);
  row[7] = 9.0f;
  row[3] = 5.0f;
  Call c;
  c.vocab = c.ld = 20;
  c.slots = {min_tokens_slot(Slot{0.0f}),                  // 7 and 11 until 10
             Slot{0.0f},                                   // never masked
             Slot{0.0f, -1, 1.0f, 0.0f, 0, 0, {7, 11}},    // a refill: position 0, stale ids
             Slot{0.0f, -1, 1.0f, 0.0f, 0, 50, {}},        // a position but nothing to mask
             Slot{0.0f, -1, 1.0f, 0.0f, 0, 50, {11, 7}}};  // its own mask, further out
  c.row_slot = {0, 1, 2, 3, 4, 0, 4};
  c.positions = {5, 5, 5, 5, 5, 20, 48};
  for (size_t r = 0; r < c.row_slot.size(); ++r)
    c.logits.insert(c.logits.end(), row.begin(), row.end());
  c.last_tokens = {-5, -5, -5, -5, -5};
  std::vector<float> after;
  const Result r = run(c, &after);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{3, 7, 7, 7, 3, 7, 3}));
  EXPECT_EQ(r.last_tokens, (std::vector<int32_t>{7, 7, 7, 7, 3}));
  // The CPU reference masks a copy: the caller's logits are untouched.
  EXPECT_EQ(after, c.logits);
}

}  // namespace
}  // namespace nanovllm
