// A batch for the shard sampler's tests (CPU and CUDA): logits with ties, -inf runs and a flat
// row; slots covering every rule sampled from shards (greedy, unfiltered, top-k with and
// without top-p / min-p, top_k at the limit); the full-row CPU sampler's tokens as the
// reference the merged shards must reproduce.
#pragma once

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/sampler.h"
#include "kernels/shard_sampler.h"
#include "tests/kernels/host_tensors.h"

namespace nanovllm::test {

struct ShardSlot {
  float temperature;
  int32_t top_k;
  float top_p, min_p;
  uint64_t seed;
};

struct ShardCase {
  int64_t vocab = 0, rows = 0;
  std::vector<float> logits;                      // [rows, vocab]
  std::vector<int32_t> row_slot;                  // [rows], -1 = padding
  std::vector<int32_t> positions;                 // [rows]
  std::vector<float> temperatures, top_p, min_p;  // [N]
  std::vector<int32_t> top_k;                     // [N]
  std::vector<int64_t> seeds;                     // [N]

  int64_t num_slots() const { return static_cast<int64_t>(temperatures.size()); }
  // Columns of each rank's shard (the LM head's ceil(V / tp)).
  int64_t shard_width(int tp) const { return (vocab + tp - 1) / tp; }
  int64_t shard_columns(int tp, int r) const {
    return std::min(shard_width(tp), vocab - r * shard_width(tp));
  }
  // Rank r's [rows, shard_width] logits; padding columns NaN (they must never be read).
  std::vector<float> shard(int tp, int r) const {
    const int64_t w = shard_width(tp), start = r * w, cols = shard_columns(tp, r);
    std::vector<float> out(static_cast<size_t>(rows * w), std::numeric_limits<float>::quiet_NaN());
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t c = 0; c < cols; ++c) out[b * w + c] = logits[b * vocab + start + c];
    return out;
  }
  kernels::SamplingSlotParams params() {
    const int64_t n = num_slots();
    kernels::SamplingSlotParams p;
    p.temperatures = view(temperatures, {n});
    p.top_k = view(top_k, {n});
    p.top_p = view(top_p, {n});
    p.min_p = view(min_p, {n});
    p.seeds = view(seeds, {n});
    return p;
  }
  // The full-row CPU sampler's tokens: what every shard merge must give.
  std::vector<int32_t> reference_tokens() {
    std::vector<int32_t> out(static_cast<size_t>(rows), -7);
    kernels::SamplingBatch b;
    b.logits = view(logits, {rows, vocab});
    b.slots = view(row_slot, {rows});
    b.positions = view(positions, {rows});
    b.params = params();
    b.out_tokens = view(out, {rows});
    kernels::cpu::sample(b);
    return out;
  }
};

// Every rule sampled from shards, several seeds each; rows take slots in turn, every 7th row
// is padding.
inline ShardCase make_shard_case(int64_t vocab, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  ShardCase c;
  c.vocab = vocab;
  c.rows = rows;
  const std::vector<ShardSlot> rules = {
      {0.0f, 0, 1.0f, 0.0f, 1},
      {0.0f, 20, 0.9f, 0.0f, 2},  // greedy (filters ignored)
      {1.0f, 0, 1.0f, 0.0f, 3},
      {0.7f, -1, 1.0f, 0.0f, 4},  // unfiltered
      {0.6f, 20, 0.95f, 0.0f, 5},
      {0.6f, 20, 0.95f, 0.0f, 6},  // Qwen3's defaults
      {1.0f, 1, 1.0f, 0.0f, 7},
      {0.8f, 40, 1.0f, 0.1f, 8},                          // top-1; top-k + min-p
      {1.3f, kernels::kShardCandidates, 0.5f, 0.02f, 9},  // top_k at the limit
      {0.005f, 5, 1.0f, 0.0f, 10},
      {1.0f, 3, 0.0f, 0.0f, 11}};  // tiny t; top_p 0
  for (const ShardSlot& s : rules) {
    c.temperatures.push_back(s.temperature);
    c.top_k.push_back(s.top_k);
    c.top_p.push_back(s.top_p);
    c.min_p.push_back(s.min_p);
    c.seeds.push_back(static_cast<int64_t>(s.seed * 0x9E3779B97F4A7C15ull));
  }
  std::normal_distribution<float> normal(0.0f, 3.0f);
  c.logits.resize(static_cast<size_t>(rows * vocab));
  for (int64_t b = 0; b < rows; ++b) {
    float* x = c.logits.data() + b * vocab;
    const int kind = static_cast<int>(b % 5);
    for (int64_t v = 0; v < vocab; ++v) {
      // Quantized to 1/4: many exact ties, inside one shard and across shards.
      float l = std::round(normal(rng) * 4.0f) / 4.0f;
      if (kind == 1 && v % 3 != 0) l = -std::numeric_limits<float>::infinity();
      if (kind == 2) l = 0.5f;                  // a flat row: the lowest ids win every tie
      if (kind == 3 && v % 97 == 13) l = 9.0f;  // tied maxima spread over every shard
      x[v] = l;
    }
    c.row_slot.push_back(b % 7 == 6 ? -1 : static_cast<int32_t>(b % c.num_slots()));
    c.positions.push_back(static_cast<int32_t>(17 + 31 * b));
  }
  return c;
}

}  // namespace nanovllm::test
