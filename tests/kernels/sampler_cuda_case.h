// The CUDA sampler tests' harness: a batch of logits rows with per-slot parameters (Case),
// run through the CPU reference and the CUDA sampler, and the checks that they agree.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/sampler.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {

inline constexpr int64_t kVocab = 151936;
inline constexpr int32_t kUnwritten = -5;  // last_tokens / out_tokens / ranks / ids before
inline constexpr float kUnwrittenLogprob = 99.0f;
inline constexpr int64_t kTopWidth = 24;  // top list width, > kMaxLogprobs on purpose
inline constexpr float kInf = std::numeric_limits<float>::infinity();

struct Slot {
  float t = 1.0f;
  int32_t k = -1;
  float p = 1.0f;
  float min_p = 0.0f;
  int64_t seed = 0;
  // min_tokens (rule P): rows whose position + 1 < min_pos cannot draw `masked`.
  int32_t min_pos = 0;
  std::vector<int32_t> masked;
  // Penalties (rule P; the slot's token_state row lives in Case::token_state) and logit_bias.
  float repetition = 1.0f, presence = 0.0f, frequency = 0.0f;
  std::vector<std::pair<int32_t, float>> bias;  // (id, value)
  int32_t num_logprobs = -1;                    // alternatives; -1: no logprobs
};
inline Slot qwen3(float t, int64_t seed) {  // Qwen3's generation_config.json
  return Slot{t, 20, 0.95f, 0.0f, seed};
}

// One call: N slots, B rows of logits in a [B, ld] buffer (first `vocab` columns used).
struct Case {
  int64_t vocab = kVocab, ld = kVocab;
  std::vector<Slot> slots;                   // [N]
  std::vector<int32_t> row_slot, positions;  // [B]; row_slot < 0 = padding
  std::vector<float> logits;                 // [B, ld], filled by fill_normal
  // [N, vocab]; given (zeros when empty) when some slot's penalties are on or it is non-empty.
  std::vector<uint16_t> token_state;
  int64_t rows() const { return static_cast<int64_t>(row_slot.size()); }
  // A row with a slot of its own.
  void add(const Slot& s, int32_t position) {
    row_slot.push_back(static_cast<int32_t>(slots.size()));
    slots.push_back(s);
    positions.push_back(position);
  }
  float* row(int64_t r) { return logits.data() + r * ld; }
  // Every row normal(0, sigma), like a real LM head's logits (most mass on a few dozen tokens).
  void fill_normal(uint32_t seed, float sigma = 3.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    logits.resize(static_cast<size_t>(rows() * ld));
    for (float& x : logits) x = d(rng);
  }
};

struct Out {
  std::vector<int32_t> tokens, last, passes;  // [B], [N], [B]
  std::vector<uint16_t> state;                // [N, V] token_state after, when given
  std::vector<float> logprob, top_logprobs;   // [B], [B, kTopWidth], when any slot asks
  std::vector<int32_t> rank, top_ids;         // [B], [B, kTopWidth]
};
// The buffers a call must leave as they were, or fill only where rule P applies.
struct Buffers {
  std::vector<float> logits;     // [B, ld] after the call
  std::vector<float> processed;  // [B, V] after the call; every unwritten byte 0xFF
};

// The slot parameters as the kernels take them, [N] each; the optional groups (min_tokens,
// penalties, logit_bias, num_logprobs) only when some slot uses them.
struct Params {
  std::vector<float> t, p, min_p, rep, pres, freq, bias_values;
  std::vector<int32_t> k, min_pos, masked, bias_count, bias_ids, num_logprobs;
  std::vector<int64_t> seeds;
  int64_t width = 1, bias_width = 1;
  bool any_mask = false, any_penalty = false, any_bias = false, any_logprobs = false;
  explicit Params(const Case& c) {
    for (const Slot& s : c.slots) {
      t.push_back(s.t);
      k.push_back(s.k);
      p.push_back(s.p);
      min_p.push_back(s.min_p);
      seeds.push_back(s.seed);
      min_pos.push_back(s.min_pos);
      rep.push_back(s.repetition);
      pres.push_back(s.presence);
      freq.push_back(s.frequency);
      bias_count.push_back(static_cast<int32_t>(s.bias.size()));
      num_logprobs.push_back(s.num_logprobs);
      width = std::max(width, static_cast<int64_t>(s.masked.size()));
      bias_width = std::max(bias_width, static_cast<int64_t>(s.bias.size()));
      any_mask = any_mask || s.min_pos != 0 || !s.masked.empty();
      any_penalty =
          any_penalty || s.repetition != 1.0f || s.presence != 0.0f || s.frequency != 0.0f;
      any_bias = any_bias || !s.bias.empty();
      any_logprobs = any_logprobs || s.num_logprobs >= 0;
    }
    any_penalty = any_penalty || !c.token_state.empty();
    for (const Slot& s : c.slots) {
      masked.insert(masked.end(), s.masked.begin(), s.masked.end());
      masked.resize(masked.size() + static_cast<size_t>(width) - s.masked.size(), -1);
      for (int64_t j = 0; j < bias_width; ++j) {
        const bool used = j < static_cast<int64_t>(s.bias.size());
        bias_ids.push_back(used ? s.bias[j].first : -1);
        bias_values.push_back(used ? s.bias[j].second : 0.0f);
      }
    }
  }
  bool any_processing() const { return any_mask || any_penalty || any_bias; }
};

inline TensorView logits_view(const void* data, const Case& c, Device dev) {
  TensorView v(const_cast<void*>(data), DType::kF32, {c.rows(), c.ld}, dev);
  v.shape[1] = c.vocab;  // rows strided by ld
  return v;
}

inline std::vector<uint16_t> initial_state(const Case& c) {
  return c.token_state.empty() ? std::vector<uint16_t>(c.slots.size() * c.vocab, 0) : c.token_state;
}

// Where one call's buffers live (host or device).
struct BatchData {
  void *logits, *slots, *positions, *t, *k, *p, *min_p, *seeds, *min_pos, *masked;
  void *rep, *pres, *freq, *state, *bias_count, *bias_ids, *bias_values, *num_logprobs;
  void *processed, *out, *last, *passes, *logprob, *rank, *top_ids, *top_logprobs;
};

inline kernels::SamplingBatch batch_of(const Case& c, const Params& h, const BatchData& d,
                                       Device dev) {
  const int64_t b = c.rows(), n = static_cast<int64_t>(c.slots.size()), v = c.vocab;
  const auto at = [dev](void* p, DType t, std::initializer_list<int64_t> dims) {
    return TensorView(p, t, dims, dev);
  };
  kernels::SamplingBatch s;
  s.logits = logits_view(d.logits, c, dev);
  s.slots = at(d.slots, DType::kI32, {b});
  s.positions = at(d.positions, DType::kI32, {b});
  s.params.temperatures = at(d.t, DType::kF32, {n});
  s.params.top_k = at(d.k, DType::kI32, {n});
  s.params.top_p = at(d.p, DType::kF32, {n});
  s.params.min_p = at(d.min_p, DType::kF32, {n});
  s.params.seeds = at(d.seeds, DType::kI64, {n});
  if (h.any_mask) {
    s.params.min_tokens_position = at(d.min_pos, DType::kI32, {n});
    s.params.min_tokens_masked_ids = at(d.masked, DType::kI32, {n, h.width});
  }
  if (h.any_penalty) {
    s.params.repetition_penalty = at(d.rep, DType::kF32, {n});
    s.params.presence_penalty = at(d.pres, DType::kF32, {n});
    s.params.frequency_penalty = at(d.freq, DType::kF32, {n});
    s.params.token_state = at(d.state, DType::kU16, {n, v});
  }
  if (h.any_bias) {
    s.params.logit_bias_count = at(d.bias_count, DType::kI32, {n});
    s.params.logit_bias_ids = at(d.bias_ids, DType::kI32, {n, h.bias_width});
    s.params.logit_bias_values = at(d.bias_values, DType::kF32, {n, h.bias_width});
  }
  if (h.any_processing()) s.processed = at(d.processed, DType::kF32, {b, v});
  s.out_tokens = at(d.out, DType::kI32, {b});
  s.last_tokens = at(d.last, DType::kI32, {n});
  s.row_passes = at(d.passes, DType::kI32, {b});
  if (h.any_logprobs) {
    s.params.num_logprobs = at(d.num_logprobs, DType::kI32, {n});
    s.logprobs = {at(d.logprob, DType::kF32, {b}), at(d.rank, DType::kI32, {b}),
                  at(d.top_ids, DType::kI32, {b, kTopWidth}),
                  at(d.top_logprobs, DType::kF32, {b, kTopWidth})};
  }
  return s;
}

inline float unwritten_float() {  // every byte 0xFF, as DeviceMem's poison
  float f;
  const uint32_t bits = 0xffffffffu;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

inline Out run_cpu(const Case& c, Buffers* after = nullptr) {
  const int64_t b = c.rows(), n = static_cast<int64_t>(c.slots.size());
  Params h(c);
  auto logits = c.logits;
  auto rs = c.row_slot, pos = c.positions;
  std::vector<float> processed(h.any_processing() ? b * c.vocab : 1, unwritten_float());
  Out o{std::vector<int32_t>(b, kUnwritten), std::vector<int32_t>(n, kUnwritten),
        std::vector<int32_t>(b, kUnwritten)};
  o.state = initial_state(c);
  o.logprob.assign(b, kUnwrittenLogprob);
  o.top_logprobs.assign(b * kTopWidth, kUnwrittenLogprob);
  o.rank.assign(b, kUnwritten);
  o.top_ids.assign(b * kTopWidth, kUnwritten);
  const BatchData d{.logits = logits.data(),
                    .slots = rs.data(),
                    .positions = pos.data(),
                    .t = h.t.data(),
                    .k = h.k.data(),
                    .p = h.p.data(),
                    .min_p = h.min_p.data(),
                    .seeds = h.seeds.data(),
                    .min_pos = h.min_pos.data(),
                    .masked = h.masked.data(),
                    .rep = h.rep.data(),
                    .pres = h.pres.data(),
                    .freq = h.freq.data(),
                    .state = o.state.data(),
                    .bias_count = h.bias_count.data(),
                    .bias_ids = h.bias_ids.data(),
                    .bias_values = h.bias_values.data(),
                    .num_logprobs = h.num_logprobs.data(),
                    .processed = processed.data(),
                    .out = o.tokens.data(),
                    .last = o.last.data(),
                    .passes = o.passes.data(),
                    .logprob = o.logprob.data(),
                    .rank = o.rank.data(),
                    .top_ids = o.top_ids.data(),
                    .top_logprobs = o.top_logprobs.data()};
  kernels::cpu::sample(batch_of(c, h, d, Device::kCpu));
  if (!h.any_penalty) o.state.clear();
  if (after) *after = {logits, processed};
  return o;
}

inline Out run_cuda(const Case& c, Buffers* after = nullptr) {
  const int64_t b = c.rows(), n = static_cast<int64_t>(c.slots.size());
  Params h(c);
  DevVec<float> logits(c.logits), t(h.t), p(h.p), min_p(h.min_p), rep(h.rep), pres(h.pres),
      freq(h.freq), bias_values(h.bias_values);
  DevVec<float> processed(h.any_processing() ? b * c.vocab : 1);  // poisoned: NaN
  DevVec<int32_t> rs(c.row_slot), pos(c.positions), k(h.k), min_pos(h.min_pos), masked(h.masked),
      bias_count(h.bias_count), bias_ids(h.bias_ids), num_logprobs(h.num_logprobs);
  DevVec<int32_t> out(std::vector<int32_t>(b, kUnwritten)),
      last(std::vector<int32_t>(n, kUnwritten));
  DevVec<int32_t> passes(b);  // poisoned: -1 until written
  DevVec<int64_t> seeds(h.seeds);
  DevVec<uint16_t> state(initial_state(c));
  DevVec<float> logprob(std::vector<float>(b, kUnwrittenLogprob)),
      top_logprobs(std::vector<float>(b * kTopWidth, kUnwrittenLogprob));
  DevVec<int32_t> rank(std::vector<int32_t>(b, kUnwritten)),
      top_ids(std::vector<int32_t>(b * kTopWidth, kUnwritten));
  const BatchData d{.logits = logits.mem.get(),
                    .slots = rs.mem.get(),
                    .positions = pos.mem.get(),
                    .t = t.mem.get(),
                    .k = k.mem.get(),
                    .p = p.mem.get(),
                    .min_p = min_p.mem.get(),
                    .seeds = seeds.mem.get(),
                    .min_pos = min_pos.mem.get(),
                    .masked = masked.mem.get(),
                    .rep = rep.mem.get(),
                    .pres = pres.mem.get(),
                    .freq = freq.mem.get(),
                    .state = state.mem.get(),
                    .bias_count = bias_count.mem.get(),
                    .bias_ids = bias_ids.mem.get(),
                    .bias_values = bias_values.mem.get(),
                    .num_logprobs = num_logprobs.mem.get(),
                    .processed = processed.mem.get(),
                    .out = out.mem.get(),
                    .last = last.mem.get(),
                    .passes = passes.mem.get(),
                    .logprob = logprob.mem.get(),
                    .rank = rank.mem.get(),
                    .top_ids = top_ids.mem.get(),
                    .top_logprobs = top_logprobs.mem.get()};
  kernels::cuda::sample(batch_of(c, h, d, Device::kCuda), nullptr);
  CUDA_CHECK(cudaGetLastError());
  Out o{out.host(), last.host(), passes.host()};
  if (h.any_penalty) o.state = state.host();
  o.logprob = logprob.host();
  o.top_logprobs = top_logprobs.host();
  o.rank = rank.host();
  o.top_ids = top_ids.host();
  if (after) *after = {logits.host(), processed.host()};
  return o;
}

// The first element where two buffers differ bit for bit, or -1.
template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  return -1;
}

inline std::string describe(const Case& c, int64_t r) {
  std::ostringstream s;
  s << "row " << r << " slot " << c.row_slot[r];
  if (c.row_slot[r] >= 0) {
    const Slot& p = c.slots[c.row_slot[r]];
    s << " (t " << p.t << " k " << p.k << " p " << p.p << " min_p " << p.min_p << " seed " << p.seed
      << " pos " << c.positions[r] << " min_pos " << p.min_pos << " masked " << p.masked.size()
      << " rep " << p.repetition << " pres " << p.presence << " freq " << p.frequency << " bias "
      << p.bias.size() << " logprobs " << p.num_logprobs << ")";
  }
  return s.str();
}

// The sampled tokens' logprobs: written for the same rows, within 1e-4, same ranks and ids.
inline void expect_same_logprobs(const Case& c, const Out& got, const Out& want) {
  for (int64_t r = 0; r < c.rows(); ++r) {
    EXPECT_EQ(got.rank[r], want.rank[r]) << describe(c, r);
    if (want.rank[r] == kUnwritten) {
      EXPECT_EQ(got.logprob[r], kUnwrittenLogprob) << describe(c, r);
      EXPECT_EQ(got.top_ids[r * kTopWidth], kUnwritten) << describe(c, r);
      continue;
    }
    EXPECT_NEAR(got.logprob[r], want.logprob[r], 1e-4) << describe(c, r);
    for (int64_t j = 0; j < kTopWidth; ++j) {
      const int64_t i = r * kTopWidth + j;
      EXPECT_EQ(got.top_ids[i], want.top_ids[i]) << describe(c, r) << " entry " << j;
      if (want.top_ids[i] < 0)
        EXPECT_EQ(got.top_logprobs[i], -kInf) << describe(c, r) << " entry " << j;
      else
        EXPECT_NEAR(got.top_logprobs[i], want.top_logprobs[i], 1e-4)
            << describe(c, r) << " entry " << j;
    }
  }
}

// CUDA against the CPU reference: tokens, last_tokens, token_state, logprobs, and the buffers
// (logits untouched, processed rows bit for bit and only where rule P applies). Returns the
// CUDA result for path-specific checks.
inline Out expect_same_as_cpu(const Case& c) {
  Buffers cpu_after, cuda_after;
  const Out want = run_cpu(c, &cpu_after), got = run_cuda(c, &cuda_after);
  for (int64_t r = 0; r < c.rows(); ++r) {
    EXPECT_EQ(got.tokens[r], want.tokens[r]) << describe(c, r);
    if (c.row_slot[r] < 0) {
      EXPECT_EQ(got.tokens[r], 0) << describe(c, r);
      EXPECT_EQ(got.passes[r], 0) << describe(c, r);
    } else {
      EXPECT_GE(got.passes[r], 1) << describe(c, r);
    }
  }
  // last_tokens: a slot no row names is untouched; one named by several rows holds one of
  // their tokens (which one is not specified: the CUDA rows race, the CPU's last row wins).
  for (size_t s = 0; s < c.slots.size(); ++s) {
    std::vector<int32_t> tokens;
    for (int64_t r = 0; r < c.rows(); ++r)
      if (c.row_slot[r] == static_cast<int32_t>(s)) tokens.push_back(want.tokens[r]);
    if (tokens.size() <= 1) {
      EXPECT_EQ(got.last[s], want.last[s]) << "last_tokens slot " << s;
    } else {
      EXPECT_NE(std::find(tokens.begin(), tokens.end(), got.last[s]), tokens.end())
          << "last_tokens slot " << s;
    }
  }
  const int64_t state_at = first_difference(got.state, want.state);
  EXPECT_EQ(state_at, -1) << "token_state differs first at slot " << state_at / c.vocab << " token "
                          << state_at % c.vocab;
  expect_same_logprobs(c, got, want);
  EXPECT_EQ(first_difference(cuda_after.logits, c.logits), -1) << "the logits were written";
  const int64_t at = first_difference(cuda_after.processed, cpu_after.processed);
  EXPECT_EQ(at, -1) << "processed differs first at " << (at < 0 ? "" : describe(c, at / c.vocab))
                    << " token " << at % c.vocab;
  return got;
}

// Every live row read its logits between lo and hi times (row_passes).
inline void expect_passes(const Case& c, const Out& o, int32_t lo, int32_t hi) {
  for (int64_t r = 0; r < c.rows(); ++r) {
    if (c.row_slot[r] < 0) continue;
    EXPECT_GE(o.passes[r], lo) << describe(c, r);
    EXPECT_LE(o.passes[r], hi) << describe(c, r);
  }
}

}  // namespace nanovllm::test
