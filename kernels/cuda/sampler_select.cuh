// The sampler leader's decisions (kernels/cuda/sampler.cu's kernel is its only user): the
// crossing bin of a merged histogram, the exact cut inside one copied bin, and the exact
// top-k / top-p / min-p rules plus the draw over the sorted candidates.
#pragma once

#include <climits>

#include "kernels/cuda/sampler_row.cuh"
#include "kernels/cuda/sampler_sort.cuh"

namespace nanovllm::kernels::cuda::sampling {

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
  } else if (r.emit) {  // the top k themselves out: one compaction of the keys >= the cut
    d.k_applied = true;
    d.pass = Pass::kCompact;
    d.level = 0;
    d.compact_key = 0;
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

// Leader, every thread: sorts cand[0, n) descending ((l desc, id asc)).
__device__ void sort_candidates(Shared& sh, int n) {
  sort_keys(sh.cand, n);
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
    if (d.pass == Pass::kCompact) sh.num_cand = 0;
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

// Leader, every thread, in place of finish_candidates for a shard's top-k row: the top k of
// the sorted candidates into out [kShardCandidates], 0-padded.
__device__ __noinline__ void emit_candidates(Shared& sh, const Row& r, const Decision& d,
                                             u64* out) {
  const int n = static_cast<int>(sh.num_cand);
  sort_candidates(sh, n);
  const int keep = min((r.use_k && !d.k_applied) ? min(r.top_k, n) : n, kShardCandidates);
  for (int i = static_cast<int>(threadIdx.x); i < kShardCandidates; i += kThreads)
    out[i] = i < keep ? sh.cand[i] : 0;
}

}  // namespace nanovllm::kernels::cuda::sampling
