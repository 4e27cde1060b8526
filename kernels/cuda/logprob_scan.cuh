// The per-block machinery of kernels/cuda/logprobs.cu (its only user): a thread's running
// lse / rank count / top list over its share of a row (Scan), the cp.async stream of the row
// through shared memory, and the block-level reductions of those.
#pragma once

#include "kernels/cuda/cp_async.cuh"
#include "kernels/logprobs.h"
#include "kernels/sampler_math.h"

namespace nanovllm::kernels::cuda::logprob_scan {

using u64 = unsigned long long;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kTop = kMaxLogprobs;
constexpr int kMaxCluster = 8;  // blocks per row (portable cluster sizes)

constexpr int kSeedElements = 4096;  // 8 per thread: enough for a tight floor
constexpr int kStages = 5;           // tiles in flight: 5 x 8 KB of the 48 KB static limit

// A thread's (or a group's) running log-sum-exp over finite logits: max and sum of exp(x - max).
struct Lse {
  float max = -INFINITY;
  float sum = 0.0f;
};

// exp(d) for d <= 0 through ex2.approx: relative error ~1e-6 where the sum is decided, far
// below the 1e-4 the header promises.
__device__ __forceinline__ float fast_exp(float d) {
  return __expf(d);
}

__device__ __forceinline__ Lse merge(Lse a, Lse b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {};
  return {m, a.sum * fast_exp(a.max - m) + b.sum * fast_exp(b.max - m)};
}

// The warp's largest key in every lane: two 32-bit reductions (high word, then the low word
// among the lanes holding that high word).
__device__ __forceinline__ u64 warp_max_key(u64 k) {
  const unsigned high = static_cast<unsigned>(k >> 32);
  const unsigned top_high = __reduce_max_sync(0xffffffffu, high);
  const unsigned low =
      __reduce_max_sync(0xffffffffu, high == top_high ? static_cast<unsigned>(k) : 0u);
  return (u64{top_high} << 32) | low;
}

// What one thread has seen of the row.
template <bool kWantTop>
struct Scan {
  Lse lse;
  int count = 0;  // logits >= the target's
  u64 top[kTop];  // descending; entries <= floor are empty (no real key is 0)
  u64 floor = 0;  // the seed's n-th key: only larger keys can still make the row's top-n
  // The logit of top[kTop - 1] (-inf while the list has room): a cheap float test that
  // rejects almost every token before its key is formed.
  float low = -INFINITY;

  __device__ __forceinline__ Scan() { reset_top(); }
  __device__ __forceinline__ void reset_top() {
#pragma unroll
    for (int k = 0; k < kTop; ++k) top[k] = floor;
    low = floor ? key_logit(floor) : -INFINITY;
  }
  // lse for one logit, exactly as defined (NaN and +-inf take no part).
  __device__ __forceinline__ void add_lse(float x) {
    if (!isfinite(x)) return;
    if (x > lse.max) {
      lse.sum = lse.sum * fast_exp(lse.max - x) + 1.0f;
      lse.max = x;
    } else {
      lse.sum += fast_exp(x - lse.max);
    }
  }
  // x's term of lse.sum once lse.max covers the finite logits: 0 for NaN (and -inf).
  __device__ __forceinline__ float term(float x) const {
    const float d = x - lse.max;
    return d <= 0.0f ? fast_exp(d) : 0.0f;
  }
  // Token v into the list when it beats the list's last.
  __device__ __forceinline__ void offer(int v, float x) {
    if (!(x >= low)) return;                                 // NaN takes no part
    const u64 key = candidate_key(x == 0.0f ? 0.0f : x, v);  // -0 ties with +0
    if (key <= top[kTop - 1]) return;                        // also every key <= floor
    u64 carry = key;
#pragma unroll
    for (int k = 0; k < kTop; ++k) {  // a sorted insert that stays in registers
      const u64 hi = max(carry, top[k]);
      carry = min(carry, top[k]);
      top[k] = hi;
    }
    low = top[kTop - 1] ? key_logit(top[kTop - 1]) : -INFINITY;
  }
  __device__ __forceinline__ void add(int v, float x, float target) {
    count += x >= target;
    add_lse(x);
    if constexpr (kWantTop) offer(v, x);
  }
  // Tokens v..v+3: one rescale and one list test per four in the common case.
  __device__ __forceinline__ void add4(int v, float4 q, float target) {
    count += (q.x >= target) + (q.y >= target) + (q.z >= target) + (q.w >= target);
    const float m4 = fmaxf(fmaxf(q.x, q.y), fmaxf(q.z, q.w));  // NaN ignored
    if (m4 == INFINITY) {
      add_lse(q.x);
      add_lse(q.y);
      add_lse(q.z);
      add_lse(q.w);
    } else {
      if (m4 > lse.max) {
        lse.sum *= fast_exp(lse.max - m4);
        lse.max = m4;
      }
      lse.sum += (term(q.x) + term(q.y)) + (term(q.z) + term(q.w));
    }
    if constexpr (kWantTop) {
      if (m4 >= low) {
        offer(v, q.x);
        offer(v + 1, q.y);
        offer(v + 2, q.z);
        offer(v + 3, q.w);
      }
    }
  }
  // Drops top[0] (this thread's entry was taken).
  __device__ __forceinline__ void pop() {
#pragma unroll
    for (int k = 0; k + 1 < kTop; ++k) top[k] = top[k + 1];
    top[kTop - 1] = 0;
  }
  // The floor's copies are no entries (the seed list holds the real one).
  __device__ __forceinline__ void drop_floor() {
#pragma unroll
    for (int k = 0; k < kTop; ++k) top[k] = top[k] > floor ? top[k] : 0;
  }
};

struct Shared {
  u64 warp_top[kWarps][kTop];  // [warps, n] each warp's merged list
  u64 seed_top[kTop];          // [n] the first kSeedElements tokens' top-n
  u64 block_top[kTop];         // [n] this block's share's
  // The leader's: every block's results, merged there.
  u64 cluster_top[kMaxCluster][kTop];  // [blocks, n]
  Lse cluster_lse[kMaxCluster];
  int cluster_count[kMaxCluster];
  u64 row_top[kTop];  // [n] the row's
  Lse warp_lse[kWarps];
  int warp_count[kWarps];
};

// Tokens [begin, end) of row x; begin is a multiple of 4 when the range is not empty (an
// empty one, a share past a small vocabulary's end, may start anywhere). Aligned rows stream
// through kStages tiles of cp.async copies in shared memory (a tile per thread per stage: each
// thread reads back only its own copies, so the wait alone orders them), which keeps ~40 KB in
// flight per SM without spending registers. The copies read through L2 only, never the
// non-coherent path (the sampler launches this as a dependent grid).
template <bool kWantTop>
__device__ __forceinline__ void scan_range(Scan<kWantTop>& s, float4 (*stage)[kThreads],
                                           const float* x, int begin, int end, float target) {
  if (begin >= end) return;
  const int tid = static_cast<int>(threadIdx.x);
  int v = begin;
  if ((reinterpret_cast<uintptr_t>(x) & 15) == 0) {
    const float4* groups = reinterpret_cast<const float4*>(x);
    const int first = begin >> 2, last = end >> 2;
    const int tiles = (last - first + kThreads - 1) / kThreads;
    const auto issue = [&](int tile) {  // every thread commits a group per tile, empty or not
      const int g = first + tile * kThreads + tid;
      const bool valid = tile < tiles && g < last;
      cp_async16(&stage[tile % kStages][tid], valid ? groups + g : groups, valid);
      cp_async_commit();
    };
    for (int tile = 0; tile < kStages; ++tile) issue(tile);
    for (int tile = 0; tile < tiles; ++tile) {
      cp_async_wait<kStages - 1>();
      const int g = first + tile * kThreads + tid;
      if (g < last) {
        s.add4(4 * g, stage[tile % kStages][tid], target);
      }
      issue(tile + kStages);  // into the slot just read
    }
    cp_async_wait<0>();  // nothing may land in the tiles after this range
    v = 4 * last;
  }
  for (int i = v + tid; i < end; i += kThreads) s.add(i, __ldcg(x + i), target);
}

// The block's lse and count in every thread of the block.
template <bool kWantTop>
__device__ __forceinline__ void reduce_lse_count(Shared& sh, Scan<kWantTop>& s) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const Lse other{__shfl_xor_sync(0xffffffffu, s.lse.max, o),
                    __shfl_xor_sync(0xffffffffu, s.lse.sum, o)};
    s.lse = merge(s.lse, other);
    s.count += __shfl_xor_sync(0xffffffffu, s.count, o);
  }
  if (lane == 0) {
    sh.warp_lse[warp] = s.lse;
    sh.warp_count[warp] = s.count;
  }
  __syncthreads();
  s.lse = {};
  s.count = 0;
  for (int w = 0; w < kWarps; ++w) {  // the same order in every thread: the same result
    s.lse = merge(s.lse, sh.warp_lse[w]);
    s.count += sh.warp_count[w];
  }
}

// Warp 0: the first n keys of up to 32 descending lists (lane l walks lists[l], null: none)
// into out[0, n) (0 past their entries). Keys are unique: one lane holds the best.
__device__ __forceinline__ void merge_lists(const u64* list, int n, u64* out) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  int next = 0;
  for (int j = 0; j < n; ++j) {
    const u64 head = list != nullptr && next < n ? list[next] : 0;
    const u64 best = warp_max_key(head);
    if (best != 0 && head == best) ++next;
    if (lane == 0) out[j] = best;
  }
}

// The first n keys of the threads' lists and `extra` (a list of n, or null) into out[0, n)
// (0 past the non-NaN tokens); the threads' lists are used up.
__device__ __forceinline__ void merge_top(Shared& sh, Scan<true>& s, int n, const u64* extra,
                                          u64* out) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  for (int j = 0; j < n; ++j) {  // keys are unique: one lane holds the warp's best
    const u64 best = warp_max_key(s.top[0]);
    if (best != 0 && s.top[0] == best) s.pop();
    if (lane == 0) sh.warp_top[warp][j] = best;
  }
  __syncthreads();
  if (warp == 0)  // lane w < kWarps walks warp w's list, lane kWarps the extra one
    merge_lists(lane < kWarps ? sh.warp_top[lane] : lane == kWarps ? extra : nullptr, n, out);
  __syncthreads();
}

}  // namespace nanovllm::kernels::cuda::logprob_scan
