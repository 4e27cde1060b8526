// The sampler's sorting networks over 64-bit candidate keys (kernels/sampler_math.h's
// candidate_key: larger logit first, the lower id on ties), all descending and bitonic: in
// shared memory, over keys the block's threads hold one each (shuffles inside a warp, shared
// memory only between warps), and the 32 largest of several warps' sorted lists merged pairwise.
#pragma once

#include "kernels/cuda/sampler_row.cuh"

namespace nanovllm::kernels::cuda::sampling {

// The larger or smaller of a pair, as the bitonic network's position asks.
__device__ __forceinline__ u64 keep_of_pair(u64 key, u64 other, bool larger) {
  return larger ? (key > other ? key : other) : (key < other ? key : other);
}

// Every lane of the warp: the warp's 32 keys sorted descending; returns lane i's i-th largest.
__device__ __forceinline__ u64 warp_sort_descending(u64 key) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
#pragma unroll
  for (int span = 2; span <= 32; span <<= 1) {
#pragma unroll
    for (int stride = span >> 1; stride > 0; stride >>= 1) {
      const u64 other = __shfl_xor_sync(0xffffffffu, key, stride);
      key = keep_of_pair(key, other, ((lane & stride) == 0) == ((lane & span) == 0));
    }
  }
  return key;
}

// Every thread of the block: warps 0 .. lists - 1 (a power of two, <= kThreads / 32) hold a list
// each, sorted descending down their lanes (0-padded); returns in warp 0 the 32 largest keys of
// them all, lane i the i-th largest (elsewhere: unspecified). Pairs of lists merge in one step
// each (lane i keeps the larger of A[i] and B[31 - i], a bitonic sequence holding the pair's 32
// largest, then five half-cleaners), the second list of a pair through `exchange` ([32 * lists]
// shared memory, each entry written once): log2(lists) barriers.
__device__ __forceinline__ u64 merge_warp_tops(u64 key, int lists, u64* exchange) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  for (int step = 1; step < lists; step <<= 1) {
    const bool in = warp < lists;
    if (in && (warp & (2 * step - 1)) == step) exchange[warp * 32 + lane] = key;
    __syncthreads();
    if (in && (warp & (2 * step - 1)) == 0) {
      const u64 other = exchange[(warp + step) * 32 + 31 - lane];
      key = key > other ? key : other;
#pragma unroll
      for (int stride = 16; stride > 0; stride >>= 1) {
        const u64 o = __shfl_xor_sync(0xffffffffu, key, stride);
        key = keep_of_pair(key, o, (lane & stride) == 0);
      }
    }
  }
  return key;
}

// Every thread of the block: sorts keys[0, size) (shared memory, size a power of two)
// descending, bitonic; written before the call and synchronised, sorted and synchronised after.
__device__ __forceinline__ void sort_keys_descending(u64* keys, int size) {
  for (int span = 2; span <= size; span <<= 1) {
    for (int stride = span / 2; stride > 0; stride >>= 1) {
      for (int i = static_cast<int>(threadIdx.x); i < size / 2; i += kThreads) {
        const int lo = 2 * i - (i & (stride - 1)), hi = lo + stride;
        const bool descending = (lo & span) == 0;
        const u64 a = keys[lo], b = keys[hi];
        if ((a < b) == descending) {
          keys[lo] = b;
          keys[hi] = a;
        }
      }
      __syncthreads();
    }
  }
}

// Every thread of the block: the same bitonic network over keys the block's first `size`
// threads hold, one each (size a power of two, 32 to kThreads; the others pass 0 and get 0
// back): returns the key of rank threadIdx.x (0 = the largest). Partners in the same warp trade
// through shuffles; only strides of 32 and more go through `exchange` ([size] shared memory,
// two barriers each), 10 of the 45 stages at 512 keys. Free to use at the call, and after it.
__device__ __forceinline__ u64 sort_held_keys_descending(u64 key, int size, u64* exchange) {
  const int i = static_cast<int>(threadIdx.x);
  const bool holds = i < size;
  for (int span = 2; span <= size; span <<= 1) {
    for (int stride = span >> 1; stride > 0; stride >>= 1) {
      u64 other;
      if (stride >= 32) {
        if (holds) exchange[i] = key;
        __syncthreads();
        other = holds ? exchange[i ^ stride] : 0;
        __syncthreads();
      } else {
        other = __shfl_xor_sync(0xffffffffu, key, stride);
      }
      // The lower index of a pair keeps the larger key where the span runs descending.
      if (holds) key = keep_of_pair(key, other, ((i & stride) == 0) == ((i & span) == 0));
    }
  }
  return key;
}

// Every thread of the block: sorts keys[0, n) (shared memory, room for n rounded up to a power
// of two, at least 32) descending, zero-padded to that power of two; synchronised after. Up to
// kThreads keys one a thread through sort_held_keys_descending, more in place.
__device__ __forceinline__ void sort_keys(u64* keys, int n) {
  int size = 32;
  while (size < n) size <<= 1;
  if (size <= kThreads) {
    const int i = static_cast<int>(threadIdx.x);
    const u64 key = sort_held_keys_descending(i < n ? keys[i] : 0, size, keys);
    if (i < size) keys[i] = key;
    __syncthreads();
    return;
  }
  for (int i = n + static_cast<int>(threadIdx.x); i < size; i += kThreads) keys[i] = 0;
  __syncthreads();
  sort_keys_descending(keys, size);
}

}  // namespace nanovllm::kernels::cuda::sampling
