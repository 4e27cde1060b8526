// The sampler's one-pass path for rows with a top-k of at most kSmallTopK (Qwen3's defaults: 20);
// kernels/cuda/sampler.cu's other sampled rows take two to four passes over the row.
//
// Each thread keeps the kThreadTopK largest raw logits of its tokens in registers (one compare a
// token once the first few are in; no votes, no shuffles). The block's floor is the top_k-th
// largest key (kernels/sampler_math.h's candidate_key of the scaled logit: larger logit first,
// the lower id on ties) among its threads' maxima: at least top_k distinct tokens reach it, so
// the block's top k all do. Each thread adds its kept tokens at or above the floor to the
// block's candidates; a thread whose smallest kept logit scales to the floor's or above may have
// dropped one that reaches it, and adds every token of its share that does instead (a second
// read of its own share, from L2; rare on real rows). The block sorts its candidates and sends
// its top k, a sorted list, to the leader block, which merges the lists into the row's 32
// largest and finishes as after a compaction (finish_candidates: top-k, top-p over the
// candidates' own mass, min-p, Gumbel-max), exactly the CPU reference's rules. A block with more
// candidates than its shared memory holds (flat rows) sends the whole row to the histogram
// passes (kSmallTopKFallback). The sorts are sampler_sort.cuh's networks: shuffles inside a
// warp, a few barriers between warps.
//
// sampler_bench on an H200, Qwen3's defaults, us a call (the warp-list path before it, from 64
// rows, and three passes below): batch 1 28.8 -> 16.5, 16 38.3 -> 25.4, 32 51.1 -> 28.4, 64
// 70.6 -> 37.7, 128 90.2 -> 55.3, 256 108.9 -> 88.4, 512 210 -> 155. With 3 kept, nearly every
// launch of 256 rows had a block with a thread re-reading its share alone (~19 dependent steps)
// while the rest of the GPU idled (Nsight Compute: SMs active 67 % of the launch against
// greedy's 92 %); 4 kept from 4 blocks a row down: batch 64 38.0 -> 35.4, 128 56.4 -> 48.4, 256
// 89.6 -> 69.3, 512 156.0 -> 130.3 (greedy: 20.9, 29.7, 48.4, 93.1), batch 1-32 unchanged.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/cuda/sampler_row.cuh"
#include "kernels/cuda/sampler_select.cuh"
#include "kernels/cuda/sampler_sort.cuh"

namespace nanovllm::kernels::cuda::sampling {

constexpr int kSmallTopK = 32;  // the largest top-k this path takes
// Logits a thread keeps: 3 where a row has 8 blocks or more (batch 1-16 lost 1-2.5 us with 4),
// 4 where it has at most kKeepFourBlocks. With long shares (297 logits a thread at one block a
// row) about one row in 100 has a thread holding 3 of the ~25 tokens at or above the floor,
// which re-reads its share alone while the GPU idles; with 4 kept that is about one in 10,000.
constexpr int kKeepFourBlocks = 4;
// Block shares longer than this (three steps of the loop over logits: 2 or 4 blocks a row and
// fewer) skip tokens below the floor seen after their first step. sampler_bench on an H200:
// batch 32 (4 blocks) 31.4 -> 28.2 us, 64 37.5 -> 36.4, 128-512 the same; with 8 blocks (2-3
// steps) batch 1-4 lost 16.2 -> 18.0 us to the extra merge.
constexpr int kLongShare = 3 * 4 * kThreads * kUnroll;
// draw_small_top_k's answer, in every thread of the row, when a block's candidates overflowed.
constexpr int32_t kSmallTopKFallback = -2;
static_assert(kSmallTopK <= 32, "the floor is one of the 32 largest maxima, in warp 0's lanes");
static_assert(kMaxCluster * kSmallTopK <= kMaxCandidates, "every block's top k fits the leader");

// A raw logit below this cannot have a scaled logit as large as the key `thr`'s (0: no key
// yet, everything passes). Rounding of the division and of the product moves a value by a few
// ulps; the margin of 2^-20 of it (and a little more near 0) keeps the bound on the safe side.
__device__ __forceinline__ float raw_bound(u64 thr, float t) {
  if (thr == 0) return -INFINITY;
  const float p = key_logit(thr) * t;
  if (!isfinite(p)) return -INFINITY;
  return p - fabsf(p) * 9.5367431640625e-07f - 1e-30f;
}

// Every thread of every block of the row's cluster: the drawn token (leader's; -1 elsewhere), or
// kSmallTopKFallback everywhere when some block's candidates did not fit.
template <int kThreadTopK>
__device__ __noinline__ int32_t draw_small_top_k(Shared& sh, const cg::cluster_group& cluster,
                                                 const Row& row) {
  const Row r = row;  // in registers: the caller's copy is in local memory, slow in the loops
  const unsigned rank = cluster.block_rank(), blocks = cluster.num_blocks();
  Shared* lead = cluster.map_shared_rank(&sh, 0);
  if (threadIdx.x == 0) {
    sh.num_local = 0;
    if (rank == 0) {
      sh.num_cand = 0;
      sh.overflowed = 0;
    }
  }
  const float t = r.temperature;
  // The thread's kThreadTopK largest raw logits, largest first (kept[0] the maximum); an equal
  // logit seen later (a higher id) is not taken. Scaling is monotone, so every token this drops
  // scales to at most its smallest kept one.
  float kept[kThreadTopK];
  int32_t kept_id[kThreadTopK];
#pragma unroll
  for (int j = 0; j < kThreadTopK; ++j) {
    kept[j] = -INFINITY;
    kept_id[j] = -1;
  }
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  u64* keys = sh.mass;  // [kBins] this block's candidates
  // The top_k-th largest key of the threads' maxima so far, in every thread (0 when fewer
  // threads have seen a finite logit). The maxima only grow, so the final floor is at least it.
  const auto floor_so_far = [&] {
    const u64 top = merge_warp_tops(
        warp_sort_descending(kept_id[0] >= 0 ? candidate_key(scaled_logit(kept[0], t), kept_id[0])
                                             : 0),
        kThreads / 32, keys);
    if (warp == 0 && lane == r.top_k - 1) sh.floor = top;
    __syncthreads();
    return sh.floor;
  };
  // After the first step of a long share, tokens below the floor so far are skipped: none can
  // reach the final floor, and the lists fill far less often.
  float skip_below = -INFINITY;
  int steps = 0;
  const bool long_share = r.end - r.begin > kLongShare;
  for_each_logit_in_steps(
      r,
      [&](int v, float x) {
        // NaN and -inf never enter.
        if (!(x > kept[kThreadTopK - 1] && x >= skip_below)) return;
        float cx = x;
        int32_t cv = v;
#pragma unroll
        for (int j = 0; j < kThreadTopK; ++j) {
          if (cx > kept[j]) {
            const float tx = kept[j];
            const int32_t tv = kept_id[j];
            kept[j] = cx;
            kept_id[j] = cv;
            cx = tx;
            cv = tv;
          }
        }
      },
      [&] {
        if (++steps == 1 && long_share) {
          skip_below = raw_bound(floor_so_far(), t);
          __syncthreads();  // keys is the next merge's exchange again
        }
      });
  // The floor: the top_k-th largest of the threads' maxima; then every finite token when fewer
  // threads saw one.
  const u64 floor = floor_so_far();
  const auto add = [&](u64 key) {
    const unsigned at = atomicAdd(&sh.num_local, 1u);
    if (at < static_cast<unsigned>(kBins)) keys[at] = key;
  };
  const bool full = kept_id[kThreadTopK - 1] >= 0;
  if (full && (floor == 0 || scaled_logit(kept[kThreadTopK - 1], t) >= key_logit(floor))) {
    for_each_logit(r, [&](int v, float x) {
      if (!(x > -INFINITY)) return;
      const u64 key = candidate_key(scaled_logit(x, t), v);
      if (key >= floor) add(key);
    });
  } else {
#pragma unroll
    for (int j = 0; j < kThreadTopK; ++j) {
      if (kept_id[j] < 0) break;
      const u64 key = candidate_key(scaled_logit(kept[j], t), kept_id[j]);
      if (key >= floor) add(key);
    }
  }
  __syncthreads();
  const int n = static_cast<int>(sh.num_local);
  const bool fits = n <= kBins;
  if (fits) sort_keys(keys, n);  // the usual few dozen one a thread in warp 0
  cluster.sync();                // the leader's count and flag are zeroed
  if (!fits) {
    if (threadIdx.x == 0) lead->overflowed = 1;
  } else {  // this block's top k into the leader's candidates, a sorted list
    const int m = min(n, r.top_k);
    if (threadIdx.x == 0) {
      const int at = static_cast<int>(atomicAdd(&lead->num_cand, static_cast<unsigned>(m)));
      sh.cross = at;
      lead->block_at[rank] = at;
      lead->block_count[rank] = m;
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < m) lead->cand[sh.cross + threadIdx.x] = keys[threadIdx.x];
  }
  cluster.sync();  // every block's keys (or its overflow) are in
  if (lead->overflowed != 0) return kSmallTopKFallback;
  if (rank != 0) return -1;
  // The row's 32 largest candidates (its top k among them): the blocks' lists merged.
  u64 key = 0;
  if (warp < static_cast<int>(blocks) && lane < sh.block_count[warp])
    key = sh.cand[sh.block_at[warp] + lane];
  key = merge_warp_tops(key, static_cast<int>(blocks), keys);
  __syncthreads();  // every list read before warp 0 writes over them
  if (warp == 0) sh.cand[lane] = key;
  if (threadIdx.x == 0) sh.num_cand = min(sh.num_cand, 32u);
  __syncthreads();
  const u64 row_max = sh.cand[0];
  // Nothing but NaN or -inf: every rule falls back to token 0, as the CPU reference does.
  if (row_max == 0 || key_logit(row_max) == -INFINITY) return 0;
  Decision d{};
  d.l_max = key_logit(row_max);
  d.k_applied = false;    // finish_candidates keeps the top k of the candidates
  d.total_known = false;  // top-p's total: the mass of those k
  return finish_candidates(sh, r, d);
}

}  // namespace nanovllm::kernels::cuda::sampling
