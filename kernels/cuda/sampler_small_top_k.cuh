// The sampler's one-pass path for rows with a top-k of at most 32 (Qwen3's defaults: 20) in
// batches of at least kSmallTopKMinRows rows; kernels/cuda/sampler.cu's other rows take two to
// four passes over the row.
//
// Each warp keeps the 32 largest candidate keys of its tokens (kernels/sampler_math.h's
// candidate_key of the scaled logit: larger logit first, the lower id on ties), sorted down its
// lanes; a token is offered only when its raw logit can reach the warp's 32nd key (scaling is
// monotone, so a raw bound a little below that key's logit times the temperature lets almost
// every token by with one compare and one vote). Each block sorts its warps' keys and sends its
// top k to the leader block's candidates, which then hold the row's top k (the largest k of
// every block's largest k); the leader finishes as after a compaction (finish_candidates:
// top-k, top-p over the candidates' own mass, min-p, Gumbel-max), exactly the CPU reference's
// rules.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/cuda/sampler_row.cuh"
#include "kernels/cuda/sampler_select.cuh"

namespace nanovllm::kernels::cuda::sampling {

constexpr int kWarpTopK = 32;  // keys a warp keeps: the largest top-k this path takes
// Batches of at least this many rows take the path: the GPU is then full of blocks, and one
// pass beats three. Below, the warps' one-at-a-time insertions, the sort and the cluster's
// barriers are not hidden behind other rows (sampler_bench, Qwen3's defaults on an H200, 3
// passes -> 1: batch 64 79 -> 71 us, 128 104 -> 90, 256 182 -> 109, 512 355 -> 210; but 32
// 51 -> 72 and 1 28.6 -> 47, where a row has 4 and 16 blocks).
constexpr int kSmallTopKMinRows = 64;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kBlockKeys = kWarpsPerBlock * kWarpTopK;  // a block's warps' keys, sorted together
static_assert((kBlockKeys & (kBlockKeys - 1)) == 0 && kBlockKeys <= kBins,
              "the block's keys are sorted (a power of two) in the mass histogram's memory");
static_assert(kMaxCluster * kWarpTopK <= kMaxCandidates, "every block's top k fits the leader");

// A raw logit below this cannot have a scaled logit as large as the key `thr`'s (0: no key
// yet, everything passes). Rounding of the division and of the product moves a value by a few
// ulps; the margin of 2^-20 of it (and a little more near 0) keeps the bound on the safe side.
__device__ __forceinline__ float raw_bound(u64 thr, float t) {
  if (thr == 0) return -INFINITY;
  const float p = key_logit(thr) * t;
  if (!isfinite(p)) return -INFINITY;
  return p - fabsf(p) * 9.5367431640625e-07f - 1e-30f;
}

// Every lane of the warp together: offers each lane's key (0: none), keeping list (lane i the
// i-th largest key so far, 0 where none) and thr (lane 31's, on every lane) up to date, one key
// at a time. (Sorting a vote's keys and merging them with the list in one bitonic network was
// tried: inlined at every offer of the unrolled loop, it made the path 1.1-2x slower.)
__device__ __forceinline__ void warp_offer(u64 key, u64& list, u64& thr, int lane) {
  unsigned pending = __ballot_sync(0xffffffffu, key > thr);
  while (pending) {
    const int src = __ffs(pending) - 1;
    pending &= pending - 1;
    const u64 k = __shfl_sync(0xffffffffu, key, src);
    if (k <= thr) continue;  // thr rose past it (k and thr are the same on every lane)
    const int pos = __popc(__ballot_sync(0xffffffffu, list > k));
    const u64 up = __shfl_up_sync(0xffffffffu, list, 1);
    if (lane > pos)
      list = up;
    else if (lane == pos)
      list = k;
    thr = __shfl_sync(0xffffffffu, list, kWarpTopK - 1);
  }
}

// Every thread of every block of the row's cluster: the drawn token (leader's; -1 elsewhere).
__device__ __noinline__ int32_t draw_small_top_k(Shared& sh, const cg::cluster_group& cluster,
                                                 const Row& r) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  Shared* lead = cluster.map_shared_rank(&sh, 0);
  if (rank == 0 && threadIdx.x == 0) sh.num_cand = 0;
  const float t = r.temperature;
  u64 list = 0, thr = 0;
  float bound = -INFINITY;
  // One token a lane, every lane of the warp at once (the loop is block-uniform).
  const auto offer = [&](int v, float x, bool valid) {
    const bool maybe = valid && x >= bound;  // NaN never: it takes no part
    if (!__any_sync(0xffffffffu, maybe)) return;
    const u64 before = thr;
    warp_offer(maybe ? candidate_key(scaled_logit(x, t), v) : 0, list, thr, lane);
    if (thr != before) bound = raw_bound(thr, t);
  };
  for_each_logit_all_lanes(r, offer);
  // The block's warps' keys, sorted (descending) in the mass histogram's memory.
  u64* keys = sh.mass;
  keys[warp * kWarpTopK + lane] = list;
  __syncthreads();
  sort_keys_descending(keys, kBlockKeys);
  cluster.sync();  // the leader's count is zeroed
  // This block's top k (none of the empty entries) into the leader's candidates.
  if (threadIdx.x == 0) {
    int n = 0;
    while (n < r.top_k && keys[n] != 0) ++n;
    sh.cross = static_cast<int>(atomicAdd(&lead->num_cand, static_cast<unsigned>(n)));
    sh.cross_count = static_cast<u64>(n);
    lead->block_max[rank] = keys[0];
  }
  __syncthreads();
  const int at = sh.cross, n = static_cast<int>(sh.cross_count);
  for (int i = static_cast<int>(threadIdx.x); i < n; i += kThreads) lead->cand[at + i] = keys[i];
  cluster.sync();  // every block's keys are in
  if (rank != 0) return -1;
  u64 row_max = 0;
  for (unsigned b = 0; b < blocks; ++b) row_max = max(row_max, sh.block_max[b]);
  // Nothing but NaN or -inf: every rule falls back to token 0, as the CPU reference does.
  if (row_max == 0 || key_logit(row_max) == -INFINITY) return 0;
  Decision d{};
  d.l_max = key_logit(row_max);
  d.k_applied = false;    // finish_candidates keeps the top k of the candidates
  d.total_known = false;  // top-p's total: the mass of those k
  return finish_candidates(sh, r, d);
}

}  // namespace nanovllm::kernels::cuda::sampling
