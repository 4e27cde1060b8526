// The CUDA sampler (rules in kernels/sampler.h): no sort of the vocabulary, no allocation, no
// host round trip, so it is captured in the decode graphs.
//
// One thread-block cluster per row (Hopper): its C blocks each read a contiguous 1/C of the
// row and meet in cluster barriers; they add their histograms into the leader block's
// (rank 0) through distributed shared memory, and the leader decides what the next pass over
// the row does.
//   greedy rows: one pass, the argmax.
//   other rows: pass 1 finds the row max (and its token).
//   unfiltered / min-p rows: then one pass of Gumbel-max; the max token's score bounds it, so
//     a token more than the largest possible noise below it draws no noise.
//   top-k / top-p rows: Then histogram passes narrow the candidates:
//     the first counts (top-k) or sums the fixed-point mass (top-p) of tokens in 2048 bins of
//     1/64 logit below the max (a token further than 32 below has zero mass); the bin where
//     the cumulative count / mass reaches top_k / the top-p target bounds the candidates.
//     - At most kMaxCandidates tokens at or above that bin: one pass copies them into the
//       leader's shared memory, which sorts them (bitonic) and applies top-k, top-p, min-p
//       and Gumbel-max exactly as the CPU reference does.
//     - More, but at most kMaxCandidates in the crossing bin itself: one pass copies that bin,
//       the leader sorts it and finds the exact cut token; a last pass draws over the tokens
//       at or above it (top-k then goes on to top-p's window the same way).
//     - Otherwise (flat rows, a cut further than 32 logits down) radix-select passes over
//       11-bit digits of the 64-bit candidate key narrow the range until one of the above
//       applies.
// Typical Qwen3 defaults (top_k 20, top_p 0.95): three passes over the row.
#include <cooperative_groups.h>

#include <climits>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/common.cuh"
#include "kernels/philox.h"
#include "kernels/sampler.h"
#include "kernels/sampler_math.h"

namespace cg = cooperative_groups;

namespace nanovllm::kernels::cuda {
namespace {

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

struct SlotParams {
  const float* temperatures;
  const int32_t* top_k;
  const float* top_p;
  const float* min_p;
  const int64_t* seeds;
};

struct Args {
  const float* logits;
  int64_t ld;  // row stride
  int vocab;
  const int32_t* slots;      // [B]
  const int32_t* positions;  // [B]
  SlotParams params;
  int num_slots;         // N
  int32_t* out_tokens;   // [B]
  int32_t* last_tokens;  // [N] or null
  int32_t* row_passes;   // [B] or null
};

// This block's share of a row and the row's parameters.
struct Row {
  const float* logits;
  int begin, end;  // [begin, end) of the vocabulary
  int vocab;
  float temperature;   // effective
  float window_scale;  // window bins per raw logit: kWindowBinsPerLogit / temperature
  int32_t top_k;
  float top_p, min_p;
  uint64_t seed;
  int32_t position;  // of the token being sampled
  bool use_k, use_p, use_min_p;
};

// f(v, logit) for every v of this block's share: kUnroll 4-wide loads in flight per thread
// when the row allows (one at a time leaves an SM far from its share of the bandwidth).
template <typename F>
__device__ __forceinline__ void for_each_logit(const Row& r, F&& f) {
  const bool vec = (reinterpret_cast<uintptr_t>(r.logits) & 15) == 0 && (r.begin & 3) == 0;
  int v = r.begin;
  if (vec) {
    const int first = r.begin >> 2, last = (r.begin + ((r.end - r.begin) & ~3)) >> 2;
    const float4* p = reinterpret_cast<const float4*>(r.logits);
    for (int i = first + static_cast<int>(threadIdx.x); i < last; i += kThreads * kUnroll) {
      float4 x[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * kThreads < last) x[u] = __ldg(p + i + u * kThreads);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = i + u * kThreads;
        if (j >= last) break;
        f(4 * j, x[u].x);
        f(4 * j + 1, x[u].y);
        f(4 * j + 2, x[u].z);
        f(4 * j + 3, x[u].w);
      }
    }
    v = 4 * last;
  }
  for (int i = v + static_cast<int>(threadIdx.x); i < r.end; i += kThreads) f(i, r.logits[i]);
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

// f(v, logit) for every v of this block's share, in steps every thread takes together:
// step_done() runs after each (block-uniform, so it may synchronise the block).
template <typename F, typename StepDone>
__device__ __forceinline__ void for_each_logit_in_steps(const Row& r, F&& f, StepDone&& step_done) {
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
        if (j >= last) break;
        f(4 * j, x[u].x);
        f(4 * j + 1, x[u].y);
        f(4 * j + 2, x[u].z);
        f(4 * j + 3, x[u].w);
      }
      step_done();
    }
    v = 4 * last;
  }
  for (int base = v; base < r.end; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x);
    if (i < r.end) f(i, r.logits[i]);
    step_done();
  }
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

// The decision after an exact cut: tokens with keys >= cut_key are the survivors of the
// current phase's filter.
__device__ void take_exact_cut(Decision& d, u64 cut_key, bool mass, const Row& r) {
  d.floor = cut_key;
  if (!mass && r.use_p) {  // top-p over the top-k tokens, from the window again
    d.k_applied = true;
    d.pass = Pass::kHistMass;
    d.level = kWindowLevel;
    d.prefix = 0;
    d.above_count = 0;
    d.total_known = false;
  } else {
    d.k_applied = d.k_applied || !mass;
    d.pass = Pass::kGumbel;
  }
}

__device__ void zero_histogram(Shared& sh) {
  for (int i = threadIdx.x; i < kBins; i += kThreads) {
    sh.count[i] = 0;
    sh.mass[i] = 0;
  }
}

// Leader, every thread: sorts cand[0, n) descending ((l desc, id asc)), bitonic.
__device__ void sort_candidates(Shared& sh, int n) {
  int size = 1;
  while (size < n) size <<= 1;
  for (int i = n + static_cast<int>(threadIdx.x); i < size; i += kThreads) sh.cand[i] = 0;
  __syncthreads();
  for (int span = 2; span <= size; span <<= 1) {
    for (int stride = span / 2; stride > 0; stride >>= 1) {
      for (int i = static_cast<int>(threadIdx.x); i < size / 2; i += kThreads) {
        const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool descending = (lo & span) == 0;
        const u64 a = sh.cand[lo], b = sh.cand[hi];
        if ((a < b) == descending) {
          sh.cand[lo] = b;
          sh.cand[hi] = a;
        }
      }
      __syncthreads();
    }
  }
}

// What the cumulative mass must reach: a fixed amount, or top_p's target of a total (the
// given one, or the mass of the n candidates themselves).
struct MassNeed {
  u64 amount;          // the fixed amount, or the known total
  float top_p;         // < 0: amount is the fixed need
  bool total_is_ours;  // the total is the candidates' own mass
};

// Leader, every thread, over the sorted cand[0, n): the first index whose cumulative mass
// (from index 0) reaches the need, or n when none does.
__device__ int first_reaching_mass(Shared& sh, int n, float l_max, MassNeed need) {
  const int first = static_cast<int>(threadIdx.x) * kPerThread;
  u64 w[kPerThread];
  CountMass mine{0, 0};
  for (int i = 0; i < kPerThread; ++i) {
    w[i] = first + i < n ? sampler_mass(key_logit(sh.cand[first + i]) - l_max) : 0;
    mine.mass += w[i];
  }
  CountMass before, all;
  ScanPair(sh.tmp.scan_pair).ExclusiveScan(mine, before, CountMass{0, 0}, CountMassSum(), all);
  if (threadIdx.x == 0) sh.cross = INT_MAX;
  __syncthreads();
  const u64 target = need.top_p < 0.0f
                         ? need.amount
                         : top_p_target(need.top_p, need.total_is_ours ? all.mass : need.amount);
  u64 run = before.mass;
  for (int i = 0; i < kPerThread && first + i < n; ++i) {
    run += w[i];
    if (run >= target) {
      atomicMin(&sh.cross, first + i);
      break;
    }
  }
  __syncthreads();
  const int cut = sh.cross;
  __syncthreads();  // sh.cross and tmp are reused by the caller
  return cut == INT_MAX ? n : cut;
}

// Leader, every thread: read the merged histogram, find the crossing bin, write the next
// decision into sh.decision; leaves the histogram zeroed for the next pass.
__device__ __noinline__ void decide(Shared& sh, const Row& r) {
  Decision d = sh.decision;
  const bool mass = d.pass == Pass::kHistMass;
  u64 c[kPerThread], w[kPerThread];
  CountMass mine{0, 0};
  for (int i = 0; i < kPerThread; ++i) {
    const int bin = bin_at(d.level, static_cast<int>(threadIdx.x) * kPerThread + i);
    c[i] = sh.count[bin];
    w[i] = mass ? sh.mass[bin] : c[i];
    mine.count += c[i];
    mine.mass += w[i];
  }
  CountMass before, all;
  ScanPair(sh.tmp.scan_pair).ExclusiveScan(mine, before, CountMass{0, 0}, CountMassSum(), all);
  if (threadIdx.x == 0) sh.cross = INT_MAX;
  __syncthreads();
  zero_histogram(sh);            // every thread holds its bins in c / w now
  if (mass && !d.total_known) {  // the first mass pass sees every token >= floor
    d.total = all.mass;
    d.total_known = true;
    d.need = top_p_target(r.top_p, d.total);
  }
  CountMass run = before;
  for (int i = 0; i < kPerThread; ++i) {
    if (c[i] > 0 && run.mass + w[i] >= d.need) {
      atomicMin(&sh.cross, static_cast<int>(threadIdx.x) * kPerThread + i);
      break;
    }
    run.count += c[i];
    run.mass += w[i];
  }
  __syncthreads();
  const int j = sh.cross;
  if (j != INT_MAX && j / kPerThread == static_cast<int>(threadIdx.x)) {
    CountMass at = before;
    for (int i = 0; i < j % kPerThread; ++i) {
      at.count += c[i];
      at.mass += w[i];
    }
    sh.cross_before = at;
    sh.cross_count = c[j % kPerThread];
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const auto restart = [&] {  // radix levels over the full key
    d.level = 0;
    d.prefix = 0;
    d.above_count = 0;
    d.need = mass ? top_p_target(r.top_p, d.total) : static_cast<u64>(r.top_k);
  };
  if (j == INT_MAX) {
    // Only the window can miss (the k-th token lies beyond it); a key level never does,
    // since its range holds the tokens still needed.
    restart();
    sh.decision = d;
    return;
  }
  const int bin = bin_at(d.level, j);
  const u64 count_ge = d.above_count + sh.cross_before.count + sh.cross_count;
  u64 cut_key = 0;
  if (d.level != kWindowLevel) cut_key = d.prefix | (static_cast<u64>(bin) << level_lo(d.level));
  if (count_ge <= static_cast<u64>(kMaxCandidates)) {
    d.pass = Pass::kCompact;
    d.compact_bin = bin;
    d.compact_key = cut_key;
  } else if (sh.cross_count <= static_cast<u64>(kMaxCandidates)) {
    d.pass = Pass::kCutInBin;
    d.mass_cut = mass;
    d.compact_bin = bin;
    d.need -= sh.cross_before.mass;  // what the bin's tokens must still add
  } else if (d.level == kWindowLevel) {
    restart();
  } else {  // a key level short of the last (there, a bin holds one token)
    d.prefix = cut_key;
    d.level += 1;
    d.need -= sh.cross_before.mass;
    d.above_count += sh.cross_before.count;
  }
  if (d.pass == Pass::kCompact || d.pass == Pass::kCutInBin) sh.num_cand = 0;
  sh.decision = d;
}

// Leader, every thread, after a kCutInBin pass: the exact cut within the copied bin.
__device__ __noinline__ void cut_in_bin(Shared& sh, const Row& r) {
  Decision d = sh.decision;
  const bool mass = d.mass_cut;
  const int n = static_cast<int>(sh.num_cand);
  sort_candidates(sh, n);
  // The bin's tokens in order; the cut is the one where the count / mass reaches the need.
  const int at = mass ? first_reaching_mass(sh, n, d.l_max, MassNeed{d.need, -1.f, false})
                      : static_cast<int>(d.need) - 1;
  if (threadIdx.x == 0) {
    take_exact_cut(d, sh.cand[min(max(at, 0), n - 1)], mass, r);
    sh.decision = d;
  }
  __syncthreads();
}

// Leader, every thread: exact top-k / top-p / min-p and the draw over the sorted candidates.
__device__ __noinline__ int32_t finish_candidates(Shared& sh, const Row& r, const Decision& d) {
  const int n = static_cast<int>(sh.num_cand);
  sort_candidates(sh, n);
  const float l_max = d.l_max;
  int keep = (r.use_k && !d.k_applied) ? min(r.top_k, n) : n;
  if (r.use_p) {
    const int cut =
        first_reaching_mass(sh, keep, l_max, MassNeed{d.total, r.top_p, !d.total_known});
    keep = min(keep, cut + 1);
  }
  Best best{0.f, -1};
  for (int i = static_cast<int>(threadIdx.x); i < keep; i += kThreads) {
    const u64 key = sh.cand[i];
    const float l = key_logit(key);
    if (r.use_min_p && i > 0 && !(sampler_exp(l - l_max) >= r.min_p)) continue;
    const int32_t id = key_id(key);
    best = BestOp()(best, Best{l + gumbel(r.seed, id, r.position), id});
  }
  __syncthreads();  // tmp was the scan's
  best = ReduceBest(sh.tmp.reduce_best).Reduce(best, BestOp());
  return best.id;
}

__global__ void __launch_bounds__(kThreads, 2) sample_kernel(Args a) {
  __shared__ Shared sh;
  const cg::cluster_group cluster = cg::this_cluster();
  const int row = blockIdx.y;
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  const bool leader = rank == 0;
  const int32_t slot = a.slots[row];
  if (slot < 0) {  // padding: the whole cluster leaves before any barrier
    if (leader && threadIdx.x == 0) {
      a.out_tokens[row] = 0;
      if (a.row_passes) a.row_passes[row] = 0;
    }
    return;
  }
  if (slot >= a.num_slots) __trap();  // rank 0's slot allocator is broken: fail the step
  Row r;
  const int chunk =
      (((a.vocab + static_cast<int>(blocks) - 1) / static_cast<int>(blocks)) + 3) & ~3;
  r.logits = a.logits + row * a.ld;
  r.begin = min(a.vocab, static_cast<int>(rank) * chunk);
  r.end = min(a.vocab, r.begin + chunk);
  r.vocab = a.vocab;
  const float t_raw = a.params.temperatures[slot];
  r.temperature = effective_temperature(t_raw);
  r.window_scale = kWindowBinsPerLogit / r.temperature;
  r.top_k = a.params.top_k[slot];
  r.top_p = a.params.top_p[slot];
  r.min_p = a.params.min_p[slot];
  r.seed = static_cast<uint64_t>(a.params.seeds[slot]);
  r.position = a.positions[row] + 1;
  r.use_k = r.top_k > 0 && r.top_k < a.vocab;
  r.use_p = r.top_p < 1.0f;
  r.use_min_p = r.min_p > 0.0f;
  const bool greedy = t_raw == 0.0f;
  const float t = r.temperature;
  int passes = 1;
  int32_t token = -1;
  const auto scaled = [t](float x) { return scaled_logit(x, t); };
  const auto everything = [](int, float) { return true; };
  if (threadIdx.x == 0) sh.best_bits = ordered_bits(-INFINITY);
  __syncthreads();
  if (greedy) {
    token = draw(
                sh, cluster, r, false, [](float x) { return x; }, everything)
                .id;
  } else {
    // Pass 1: the row's largest logit and its token (raw: division is monotone, so scaling
    // it gives the largest scaled one).
    if (leader) zero_histogram(sh);  // the others add into it from the next pass on
    u64 mx = 0;
    for_each_logit(r, [&](int v, float x) {
      // (x, lowest id) as one key; NaN takes no part.
      const u64 k =
          x == x ? (u64{ordered_bits(x)} << 32) | (0xffffffffu - static_cast<uint32_t>(v)) : 0;
      mx = k > mx ? k : mx;
    });
    mx = ReduceMax(sh.tmp.reduce_max).Reduce(mx, MaxOp());
    Shared* lead = cluster.map_shared_rank(&sh, 0);
    if (threadIdx.x == 0) lead->block_max[rank] = mx;
    cluster.sync();
    // The bound holds where the max token is a candidate for sure: no top-k / top-p cut
    // (min-p keeps it: sampler_exp(0) == 1).
    const bool uncut = !r.use_k && !r.use_p;
    if (leader && threadIdx.x == 0) {
      Decision d{};
      u64 row_max = 0;
      for (unsigned b = 0; b < blocks; ++b) row_max = max(row_max, sh.block_max[b]);
      d.x_max = float_from_ordered(static_cast<uint32_t>(row_max >> 32));
      d.l_max = scaled_logit(d.x_max, t);
      d.level = kWindowLevel;
      d.k_applied = !r.use_k;
      d.need = static_cast<u64>(r.top_k);
      d.pass = r.use_k ? Pass::kHistCount : r.use_p ? Pass::kHistMass : Pass::kGumbel;
      sh.decision = d;
      // The max token's score bounds the draw: a token more than kMaxGumbel below it cannot
      // win, so most tokens skip their noise (every block starts from it).
      const int32_t top = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(row_max));
      const unsigned bound = ordered_bits(d.l_max + gumbel(r.seed, top, r.position));
      if (uncut)
        for (unsigned b = 0; b < blocks; ++b) cluster.map_shared_rank(&sh, b)->best_bits = bound;
    }
    cluster.sync();
    while (true) {
      if (threadIdx.x == 0) sh.local = lead->decision;
      __syncthreads();
      const Decision d = sh.local;
      const float l_max = d.l_max;
      ++passes;
      if (d.pass == Pass::kHistCount || d.pass == Pass::kHistMass) {
        const bool mass = d.pass == Pass::kHistMass;
        if (!leader) zero_histogram(sh);  // the leader's was zeroed when it decided
        __syncthreads();
        for_each_logit(r, [&](int v, float x) {
          const int bin = bin_of(d, r, v, x);
          if (bin < 0) return;
          atomicAdd(&sh.count[bin], 1u);
          if (mass)
            atomicAdd(&sh.mass[bin], static_cast<u64>(sampler_mass(scaled_logit(x, t) - l_max)));
        });
        if (!leader) {  // add this block's histogram into the leader's
          __syncthreads();
          for (int i = threadIdx.x; i < kBins; i += kThreads) {
            if (sh.count[i] == 0) continue;
            atomicAdd(&lead->count[i], sh.count[i]);
            if (mass) atomicAdd(&lead->mass[i], sh.mass[i]);
          }
        }
        cluster.sync();  // the leader's histogram complete
        if (leader) decide(sh, r);
        cluster.sync();  // the decision published
        continue;
      }
      if (d.pass == Pass::kCompact || d.pass == Pass::kCutInBin) {
        const bool whole_bin = d.pass == Pass::kCutInBin;
        for_each_logit(r, [&](int v, float x) {
          bool in;
          if (whole_bin) {
            in = bin_of(d, r, v, x) == d.compact_bin;
          } else if (d.level == kWindowLevel) {
            const int bin = bin_of(d, r, v, x);
            in = bin >= 0 && bin <= d.compact_bin;
          } else {
            const u64 key = candidate_key(scaled_logit(x, t), v);
            in = key >= d.floor && key >= d.compact_key;
          }
          if (in) lead->cand[atomicAdd(&lead->num_cand, 1u)] = candidate_key(scaled_logit(x, t), v);
        });
        cluster.sync();  // every candidate copied
        if (!whole_bin) {
          if (leader) token = finish_candidates(sh, r, d);
          break;
        }
        if (leader) cut_in_bin(sh, r);
        cluster.sync();  // the decision published
        continue;
      }
      // Pass::kGumbel: the draw over every token at or above the exact cut.
      token = draw(sh, cluster, r, true, scaled, [&](int v, float l) {
                // The row's first token (l == l_max) passes min-p: sampler_exp(0) == 1.
                return candidate_key(l, v) >= d.floor &&
                       (!r.use_min_p || sampler_exp(l - l_max) >= r.min_p);
              }).id;
      break;
    }
  }
  if (leader && threadIdx.x == 0) {
    a.out_tokens[row] = token;
    if (a.last_tokens) a.last_tokens[slot] = token;
    if (a.row_passes) a.row_passes[row] = passes;
  }
}

// Clusters of c blocks that run at once (0 when c blocks cannot form a cluster here).
int max_active_clusters(int c) {
  static int cached[kMaxCluster + 1] = {};
  static bool known[kMaxCluster + 1] = {};
  if (known[c]) return cached[c];
  if (c > 8)
    CUDA_CHECK(
        cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(c), 1);
  config.blockDim = dim3(kThreads);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(c);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, sample_kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();  // a size this GPU cannot form: not a failure, not a choice
    n = 0;
  }
  cached[c] = n;
  known[c] = true;
  return n;
}

// Blocks per row: the most that still run the whole batch in one wave (small batches spread
// over the GPU; a second wave would double the time).
int cluster_size(int64_t batch) {
  for (int c = kMaxCluster; c > 1; c /= 2)
    if (batch <= max_active_clusters(c)) return c;
  return 1;
}

void check_batch(const SamplingBatch& s) {
  check_cuda_tensor(s.logits, DType::kF32, "sampler logits");
  check_cuda_tensor(s.slots, DType::kI32, "sampler slots");
  check_cuda_tensor(s.positions, DType::kI32, "sampler positions");
  check_cuda_tensor(s.params.temperatures, DType::kF32, "sampler temperatures");
  check_cuda_tensor(s.params.top_k, DType::kI32, "sampler top_k");
  check_cuda_tensor(s.params.top_p, DType::kF32, "sampler top_p");
  check_cuda_tensor(s.params.min_p, DType::kF32, "sampler min_p");
  check_cuda_tensor(s.params.seeds, DType::kI64, "sampler seeds");
  check_cuda_tensor(s.out_tokens, DType::kI32, "sampler out_tokens");
  if (s.last_tokens.data) check_cuda_tensor(s.last_tokens, DType::kI32, "sampler last_tokens");
  if (s.row_passes.data) check_cuda_tensor(s.row_passes, DType::kI32, "sampler row_passes");
  CHECK_EQ(s.logits.ndim, 2);
  CHECK_EQ(s.logits.stride[1], 1);
  CHECK_GT(s.logits.size(1), 0);
  CHECK_LT(s.logits.size(1), int64_t{1} << 30);
  CHECK_EQ(s.slots.size(0), s.logits.size(0));
  CHECK_EQ(s.positions.size(0), s.logits.size(0));
  CHECK_EQ(s.out_tokens.size(0), s.logits.size(0));
  const int64_t n = s.params.temperatures.size(0);
  CHECK(s.params.top_k.size(0) == n && s.params.top_p.size(0) == n && s.params.min_p.size(0) == n &&
        s.params.seeds.size(0) == n);
  CHECK(!s.last_tokens.data || s.last_tokens.size(0) == n);
}

}  // namespace

void sample(const SamplingBatch& s, cudaStream_t stream) {
  check_batch(s);
  const int64_t batch = s.logits.size(0);
  if (batch == 0) return;
  CHECK_LT(batch, int64_t{65536});  // grid.y
  const Args a{s.logits.ptr<float>(),
               s.logits.stride[0],
               static_cast<int>(s.logits.size(1)),
               s.slots.ptr<int32_t>(),
               s.positions.ptr<int32_t>(),
               SlotParams{s.params.temperatures.ptr<float>(), s.params.top_k.ptr<int32_t>(),
                          s.params.top_p.ptr<float>(), s.params.min_p.ptr<float>(),
                          s.params.seeds.ptr<int64_t>()},
               static_cast<int>(s.params.temperatures.size(0)),
               s.out_tokens.ptr<int32_t>(),
               s.last_tokens.data ? s.last_tokens.ptr<int32_t>() : nullptr,
               s.row_passes.data ? s.row_passes.ptr<int32_t>() : nullptr};
  const int c = cluster_size(batch);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(c), static_cast<unsigned>(batch));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(c);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, sample_kernel, a));
}

}  // namespace nanovllm::kernels::cuda
