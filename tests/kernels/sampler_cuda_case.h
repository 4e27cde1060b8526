// The CUDA sampler tests' harness: a batch of logits rows with per-slot parameters (Case),
// run through the CPU reference and the CUDA sampler, and the checks that they agree.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/sampler.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {

inline constexpr int64_t kVocab = 151936;
inline constexpr int32_t kUnwritten = -5;  // last_tokens / out_tokens before the call
inline constexpr float kInf = std::numeric_limits<float>::infinity();

struct Slot {
  float t = 1.0f;
  int32_t k = -1;
  float p = 1.0f;
  float min_p = 0.0f;
  int64_t seed = 0;
  // min_tokens (rule 0): rows whose position + 1 < min_pos cannot draw `masked`.
  int32_t min_pos = 0;
  std::vector<int32_t> masked;
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
};

// The slot parameters as the kernels take them, [N] each; the min_tokens ones (given only
// when some slot has a mask) [N] and [N, width] padded with -1.
struct Params {
  std::vector<float> t, p, min_p;
  std::vector<int32_t> k, min_pos, masked;
  std::vector<int64_t> seeds;
  int64_t width = 1;
  bool any_mask = false;
  explicit Params(const std::vector<Slot>& slots) {
    for (const Slot& s : slots) {
      t.push_back(s.t);
      k.push_back(s.k);
      p.push_back(s.p);
      min_p.push_back(s.min_p);
      seeds.push_back(s.seed);
      min_pos.push_back(s.min_pos);
      width = std::max(width, static_cast<int64_t>(s.masked.size()));
      any_mask = any_mask || s.min_pos != 0 || !s.masked.empty();
    }
    for (const Slot& s : slots) {
      masked.insert(masked.end(), s.masked.begin(), s.masked.end());
      masked.resize(masked.size() + static_cast<size_t>(width) - s.masked.size(), -1);
    }
  }
};

inline TensorView logits_view(const void* data, const Case& c, Device dev) {
  TensorView v(const_cast<void*>(data), DType::kF32, {c.rows(), c.ld}, dev);
  v.shape[1] = c.vocab;  // rows strided by ld
  return v;
}

inline Out run_cpu(const Case& c) {
  const int64_t b = c.rows(), n = static_cast<int64_t>(c.slots.size());
  Params h(c.slots);
  auto rs = c.row_slot, pos = c.positions;
  Out o{std::vector<int32_t>(b, kUnwritten), std::vector<int32_t>(n, kUnwritten),
        std::vector<int32_t>(b, kUnwritten)};
  kernels::cpu::sample(
      {logits_view(c.logits.data(), c, Device::kCpu),
       host_view(rs.data(), DType::kI32, {b}),
       host_view(pos.data(), DType::kI32, {b}),
       {host_view(h.t.data(), DType::kF32, {n}), host_view(h.k.data(), DType::kI32, {n}),
        host_view(h.p.data(), DType::kF32, {n}), host_view(h.min_p.data(), DType::kF32, {n}),
        host_view(h.seeds.data(), DType::kI64, {n}),
        h.any_mask ? host_view(h.min_pos.data(), DType::kI32, {n}) : TensorView(),
        h.any_mask ? host_view(h.masked.data(), DType::kI32, {n, h.width}) : TensorView()},
       host_view(o.tokens.data(), DType::kI32, {b}),
       host_view(o.last.data(), DType::kI32, {n}),
       host_view(o.passes.data(), DType::kI32, {b})});
  return o;
}

// logits_after: the device logits after the call (the min_tokens mask writes into them).
inline Out run_cuda(const Case& c, std::vector<float>* logits_after = nullptr) {
  const int64_t b = c.rows(), n = static_cast<int64_t>(c.slots.size());
  Params h(c.slots);
  DevVec<float> logits(c.logits), t(h.t), p(h.p), min_p(h.min_p);
  DevVec<int32_t> rs(c.row_slot), pos(c.positions), k(h.k), min_pos(h.min_pos), masked(h.masked);
  DevVec<int32_t> out(std::vector<int32_t>(b, kUnwritten)),
      last(std::vector<int32_t>(n, kUnwritten));
  DevVec<int32_t> passes(b);  // poisoned: -1 until written
  DevVec<int64_t> seeds(h.seeds);
  kernels::cuda::sample(
      {logits_view(logits.mem.get(), c, Device::kCuda),
       rs.view(DType::kI32, {b}),
       pos.view(DType::kI32, {b}),
       {t.view(DType::kF32, {n}), k.view(DType::kI32, {n}), p.view(DType::kF32, {n}),
        min_p.view(DType::kF32, {n}), seeds.view(DType::kI64, {n}),
        h.any_mask ? min_pos.view(DType::kI32, {n}) : TensorView(),
        h.any_mask ? masked.view(DType::kI32, {n, h.width}) : TensorView()},
       out.view(DType::kI32, {b}),
       last.view(DType::kI32, {n}),
       passes.view(DType::kI32, {b})},
      nullptr);
  CUDA_CHECK(cudaGetLastError());
  if (logits_after) *logits_after = logits.host();
  return {out.host(), last.host(), passes.host()};
}

inline std::string describe(const Case& c, int64_t r) {
  std::ostringstream s;
  s << "row " << r << " slot " << c.row_slot[r];
  if (c.row_slot[r] >= 0) {
    const Slot& p = c.slots[c.row_slot[r]];
    s << " (t " << p.t << " k " << p.k << " p " << p.p << " min_p " << p.min_p << " seed " << p.seed
      << " pos " << c.positions[r] << " min_pos " << p.min_pos << " masked " << p.masked.size()
      << ")";
  }
  return s.str();
}

// CUDA against the CPU reference; returns the CUDA result for path-specific checks.
inline Out expect_same_as_cpu(const Case& c) {
  const Out want = run_cpu(c), got = run_cuda(c);
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
