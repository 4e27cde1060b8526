// The sampler's per-row machinery (kernels/cuda/sampler.cu's kernel is its only user): the
// constants, the leader's Decision and the blocks' shared memory, the loops over a block's
// share of a row, the window / digit bins, and the Gumbel-max draw.
#pragma once

#include <cooperative_groups.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/philox.h"
#include "kernels/sampler_math.h"
#include "kernels/shard_sampler_math.h"

namespace nanovllm::kernels::cuda::sampling {

namespace cg = cooperative_groups;

using u64 = unsigned long long;

constexpr int kThreads = 512;
constexpr int kMaxCluster = 16;  // blocks per row (past 8: a non-portable cluster)
constexpr int kBins = 2048;      // 11-bit digits
constexpr int kDigitBits = 11;
constexpr int kKeyLevels = 6;  // 64-bit keys: five 11-bit digits and a 9-bit one
static_assert(kDigitBits * kKeyLevels >= 64 && kDigitBits * (kKeyLevels - 1) < 64);
constexpr int kPerThread = kBins / kThreads;
constexpr int kMaxCandidates = kPerThread * kThreads;  // sorted in the leader's shared memory
constexpr float kWindowBinsPerLogit = 64.0f;           // window: kBins / 64 = 32 logits
constexpr int kWindowLevel = -1;
constexpr int kUnroll = 4;  // float4 loads in flight per thread
// No Gumbel draw exceeds this: u <= 1 - 2^-24 (philox.h) gives g <= 16.6355.
constexpr float kMaxGumbel = 16.75f;

enum class Pass : int { kHistCount, kHistMass, kCompact, kCutInBin, kGumbel };

// What the next pass over the row does; the leader's copy is authoritative.
struct Decision {
  Pass pass;
  int level;         // kWindowLevel, or the key digit 0..kKeyLevels-1
  u64 prefix;        // key digits chosen at earlier levels
  u64 floor;         // tokens with a smaller key take no part (an exact cut made earlier)
  u64 need;          // count / mass still to reach within this level's range
  u64 above_count;   // tokens above this level's range (chosen at earlier levels)
  u64 total;         // top-p's total mass, when total_known
  float x_max;       // the row's largest raw logit
  float l_max;       // the row's largest scaled logit, scaled_logit(x_max)
  u64 compact_key;   // kCompact at a key level: keys >= this are the candidates
  int compact_bin;   // kCompact at the window level: bins <= this are the candidates;
                     // kCutInBin: the bin whose tokens are copied
  bool total_known;  // total holds the mass of every token >= floor
  bool k_applied;    // floor holds the top-k cut (or the row has none)
  bool mass_cut;     // kCutInBin: the cut reaches top-p's mass, else top-k's count
};

struct Best {  // higher score wins, the lower id breaks ties (the CPU's order)
  float score;
  int32_t id;
};
struct BestOp {
  __device__ Best operator()(const Best& a, const Best& b) const {
    if (a.id < 0) return b;
    if (b.id < 0) return a;
    if (a.score > b.score || (a.score == b.score && a.id < b.id)) return a;
    return b;
  }
};
struct MaxOp {
  __device__ u64 operator()(u64 a, u64 b) const { return a > b ? a : b; }
};
struct CountMass {
  u64 count, mass;
};
struct CountMassSum {
  __device__ CountMass operator()(const CountMass& a, const CountMass& b) const {
    return {a.count + b.count, a.mass + b.mass};
  }
};

// Warp-based variants: their scratch is a few words per warp, not one per thread.
using ReduceMax = cub::BlockReduce<u64, kThreads, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;
using ReduceBest = cub::BlockReduce<Best, kThreads, cub::BLOCK_REDUCE_WARP_REDUCTIONS>;
using ScanPair = cub::BlockScan<CountMass, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;

struct Shared {
  // This block's histogram of the current pass; the leader's also receives the others'.
  unsigned count[kBins];         // [kBins]
  u64 mass[kBins];               // [kBins] fixed-point mass (top-p passes)
  u64 cand[kMaxCandidates];      // leader: compacted candidate keys
  unsigned num_cand;             // leader: entries of cand
  unsigned num_local;            // one-pass top-k: this block's candidates (in mass)
  unsigned overflowed;           // one-pass top-k, leader: some block's candidates did not fit
  u64 floor;                     // one-pass top-k: this block's floor
  int block_at[kMaxCluster];     // one-pass top-k, leader: where each block's sorted top k
  int block_count[kMaxCluster];  //   starts in cand, and how many
  u64 block_max[kMaxCluster];    // leader: each block's largest key
  Best block_best[kMaxCluster];  // leader: each block's draw
  Decision decision;             // leader: the next pass
  Decision local;                // every block: its copy of the leader's decision
  unsigned best_bits;            // ordered_bits of the best score drawn in this block so far
  int cross;                     // leader: order index of the crossing bin
  CountMass cross_before;        // leader: count / mass before the crossing bin
  u64 cross_count;               // leader: tokens in the crossing bin
  union {
    ReduceMax::TempStorage reduce_max;
    ReduceBest::TempStorage reduce_best;
    ScanPair::TempStorage scan_pair;
  } tmp;
};

// This block's share of a row and the row's parameters.
struct Row {
  const float* logits;
  int begin, end;      // [begin, end) of the row's columns
  int vocab;           // the row's columns
  int id_offset;       // column c is token id_offset + c (a vocabulary shard's start, else 0)
  bool emit;           // shard candidates out instead of a draw (kernels/shard_sampler.h)
  float temperature;   // effective
  float window_scale;  // window bins per raw logit: kWindowBinsPerLogit / temperature
  int32_t top_k;
  float top_p, min_p;
  uint64_t seed;
  int32_t position;  // of the token being sampled
  bool use_k, use_p, use_min_p;
};

// f(v, logit) for every token id v of this block's share, kUnroll 4-wide loads in flight per thread
// when the row allows (one at a time leaves an SM far from its share of the bandwidth), in
// steps every thread takes together: step_done() runs after each (block-uniform, so it may
// synchronise the block). kAllLanes: f(v, logit, valid) instead, on every lane at every token
// slot of a step, valid false past the share (so that f may vote across the warp).
template <bool kAllLanes, typename F, typename StepDone>
__device__ __forceinline__ void for_each_logit_impl(const Row& r, F&& f, StepDone&& step_done) {
  const auto call = [&](int id, float x, bool valid) {
    if constexpr (kAllLanes)
      f(id, x, valid);
    else
      f(id, x);
  };
  const bool vec = (reinterpret_cast<uintptr_t>(r.logits) & 15) == 0 && (r.begin & 3) == 0;
  int v = r.begin;
  if (vec) {
    const int first = r.begin >> 2, last = (r.begin + ((r.end - r.begin) & ~3)) >> 2;
    const float4* p = reinterpret_cast<const float4*>(r.logits);
    for (int base = first; base < last; base += kThreads * kUnroll) {
      const int i = base + static_cast<int>(threadIdx.x);
      float4 x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kThreads < last) x[u] = __ldg(p + i + u * kThreads);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = i + u * kThreads;
        if constexpr (!kAllLanes) {
          if (j >= last) break;
        }
        const bool valid = j < last;
        const int id = r.id_offset + 4 * j;
        call(id, x[u].x, valid);
        call(id + 1, x[u].y, valid);
        call(id + 2, x[u].z, valid);
        call(id + 3, x[u].w, valid);
      }
      step_done();
    }
    v = 4 * last;
  }
  for (int base = v; base < r.end; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x);
    if constexpr (kAllLanes)
      f(r.id_offset + i, i < r.end ? r.logits[i] : 0.0f, i < r.end);
    else if (i < r.end)
      f(r.id_offset + i, r.logits[i]);
    step_done();
  }
}

template <typename F, typename StepDone>
__device__ __forceinline__ void for_each_logit_in_steps(const Row& r, F&& f, StepDone&& step_done) {
  for_each_logit_impl<false>(r, f, step_done);
}

template <typename F>
__device__ __forceinline__ void for_each_logit(const Row& r, F&& f) {
  for_each_logit_in_steps(r, f, [] {});
}

// f(v, logit, valid) on every lane, block-uniform (for_each_logit_impl's kAllLanes).
template <typename F>
__device__ __forceinline__ void for_each_logit_all_lanes(const Row& r, F&& f) {
  for_each_logit_impl<true>(r, f, [] {});
}

__device__ __forceinline__ float gumbel(uint64_t seed, int32_t id, int32_t position) {
  return gumbel_from_bits(sampler_random_bits(seed, id, position));
}

__device__ __forceinline__ int level_lo(int level) {
  return max(0, 64 - kDigitBits * (level + 1));
}
__device__ __forceinline__ int level_hi(int level) {
  return 64 - kDigitBits * level;
}
// The window bin of a raw logit (0 = at the max), or -1 beyond the window. Taken on raw
// logits (no division): it only has to be monotone and the same in every pass, since the
// exact order is settled on the candidates' keys. Past the window (>= 32 scaled logits below
// the max, give or take an ulp) a token's mass is 0 (sampler_mass(-27.8) already is).
__device__ __forceinline__ int window_bin(float x, float x_max, float scale) {
  const float d = (x_max - x) * scale;
  if (!(d < static_cast<float>(kBins))) return -1;
  return min(kBins - 1, static_cast<int>(d));
}
// The bin of token (v, x) at the decision's level, or -1 outside the level's range.
__device__ __forceinline__ int bin_of(const Decision& d, const Row& r, int v, float x) {
  if (d.level == kWindowLevel) {
    const int bin = window_bin(x, d.x_max, r.window_scale);
    if (bin < 0 || d.floor == 0) return bin;
    return candidate_key(scaled_logit(x, r.temperature), v) >= d.floor ? bin : -1;
  }
  const u64 key = candidate_key(scaled_logit(x, r.temperature), v);
  if (key < d.floor) return -1;
  const int hi = level_hi(d.level), lo = level_lo(d.level);
  if (hi < 64 && (key >> hi) != (d.prefix >> hi)) return -1;
  return static_cast<int>((key >> lo) & ((u64{1} << (hi - lo)) - 1));
}
// Order index (0 = the largest tokens) <-> bin: window bins grow downwards, digits upwards.
__device__ __forceinline__ int bin_at(int level, int j) {
  return level == kWindowLevel ? j : kBins - 1 - j;
}

// Every block: its best (l + noise, id) over the tokens keep(v, l) accepts, l = logit_of(x),
// merged in the leader; returns the row's best in the leader's thread 0 (others:
// unspecified). Without noise it is the argmax of l.
// With noise, a token whose logit plus the largest noise cannot beat the block's best score
// so far (sh.best_bits, seeded with the max token's) draws none; the others queue up in
// sh.cand and are drawn densely after each step, so a warp whose lanes mostly skip costs
// nothing (a full queue draws in place).
template <typename LogitOf, typename Keep>
__device__ Best draw(Shared& sh, const cg::cluster_group& cluster, const Row& r, bool noise,
                     LogitOf logit_of, Keep keep) {
  Best best{0.f, -1};
  if (!noise) {
    for_each_logit(r, [&](int v, float x) {
      const float l = logit_of(x);
      if (keep(v, l)) best = BestOp()(best, Best{l, v});
    });
  } else {
    const volatile unsigned& block_best = sh.best_bits;
    const float inv_t = 1.0f / r.temperature;
    const auto draw_one = [&](int v, float l) {
      best = BestOp()(best, Best{l + gumbel(r.seed, v, r.position), v});
      if (best.id == v) atomicMax(&sh.best_bits, ordered_bits(best.score));
    };
    if (threadIdx.x == 0) sh.num_cand = 0;
    __syncthreads();
    for_each_logit_in_steps(
        r,
        [&](int v, float x) {
          // kMaxGumbel's 0.11 of slack and the relative term cover x * inv_t's error
          // against x / t.
          const float approx = x * inv_t;
          const float bound =
              fmaxf(float_from_ordered(block_best), best.id >= 0 ? best.score : -INFINITY);
          if (approx + kMaxGumbel + fabsf(approx) * 4e-7f < bound) return;
          const float l = logit_of(x);
          if (!keep(v, l)) return;
          const unsigned at = atomicAdd(&sh.num_cand, 1u);
          if (at < static_cast<unsigned>(kMaxCandidates))
            sh.cand[at] = (u64{__float_as_uint(l)} << 32) | static_cast<uint32_t>(v);
          else
            draw_one(v, l);
        },
        [&] {
          __syncthreads();
          const int n = min(static_cast<int>(sh.num_cand), kMaxCandidates);
          for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) {
            const u64 e = sh.cand[i];
            draw_one(static_cast<int>(static_cast<uint32_t>(e)),
                     __uint_as_float(static_cast<uint32_t>(e >> 32)));
          }
          __syncthreads();
          if (threadIdx.x == 0) sh.num_cand = 0;
          __syncthreads();
        });
  }
  best = ReduceBest(sh.tmp.reduce_best).Reduce(best, BestOp());
  if (threadIdx.x == 0) cluster.map_shared_rank(&sh, 0)->block_best[cluster.block_rank()] = best;
  cluster.sync();
  Best row{0.f, -1};
  if (cluster.block_rank() == 0 && threadIdx.x == 0)
    for (unsigned b = 0; b < cluster.num_blocks(); ++b) row = BestOp()(row, sh.block_best[b]);
  return row;
}

}  // namespace nanovllm::kernels::cuda::sampling
