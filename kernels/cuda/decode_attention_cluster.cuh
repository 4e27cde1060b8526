// Decode attention for batches too small to fill the GPU, its split-KV groups merged inside a
// thread-block cluster. Why: at batch 1 the dealt split kernel (decode_attention.cu) spreads a
// few tiles over every resident CTA slot and its last CTA of each group learns that it is last
// through a GPU-scope fence and an atomic on a counter, two L2 round trips on the step's
// critical path; the step spent 8.3 us a layer in attention for about 1 us of cache bytes
// (bench/README.md, issue 15's fourth pass). Here the C CTAs of one (sequence, kv head) are one
// cluster, each takes a contiguous C-th of the context's tiles, writes its partial to scratch,
// and the cluster's hardware barrier (release / acquire at cluster scope) replaces the fence,
// the atomic and the counters; CTA 0 of the cluster then merges the partials.
//
// Grid (C, Hkv, B), cluster (C, 1, 1); scratch cell ((b * Hkv + hk) * C + r) for CTA r, so the
// call needs B * Hkv * C cells. Nothing depends on host-side lengths: a graph captured at one
// batch size stays right at every replay, whatever the contexts. A context of one CTA's share
// or less is written directly by CTA 0; padding rows (context_len <= 0) get zeros.
#pragma once

#include "kernels/cuda/decode_attention_merge.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"

namespace nanovllm::kernels::cuda::decode {

// Every thread of the cluster arrives, its writes released at cluster scope, and waits for all
// others, acquiring theirs (what cooperative groups' cluster.sync() does, spelled out so that
// the memory order is visible here).
__device__ __forceinline__ void cluster_barrier() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}

// CTA r's share of a context of `tiles` tiles: [first, first + count), ceil(tiles / C) each in
// order, the last ones shorter or empty.
template <int C>
__device__ __forceinline__ void cluster_share(int tiles, int r, int& first, int& count) {
  const int per = (tiles + C - 1) / C;
  first = min(tiles, r * per);
  count = min(tiles, first + per) - first;
}

// Attend: attend_tiles or attend_tiles_mma of the kernel's path (decode_attention.cu's attend).
template <int D, int G, int C, class Attend>
__device__ __forceinline__ void attend_in_cluster(const DecodeArgs& a, float4* smem,
                                                  const Attend& attend) {
  const int r = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int ctx = a.context_lens[b];  // copied in before the step's first kernel
  const int tiles = context_tiles<D>(ctx);
  const int per = (tiles + C - 1) / C;
  const int parts = per > 0 ? (tiles + per - 1) / per : 0;  // CTAs with tiles
  int first = 0, count = 0;
  cluster_share<C>(tiles, r, first, count);
  bool waited = false;
  const int64_t cell0 = (static_cast<int64_t>(b) * a.hkv + hk) * C;
  if (parts <= 1) {  // one CTA's share or nothing (zeros): CTA 0 writes the rows itself
    if (r == 0) attend(smem, b, hk, ctx, 0, tiles, int64_t{-1}, waited);
  } else if (count > 0) {
    attend(smem, b, hk, ctx, first, count, cell0 + r, waited);
  }
  wait_once(waited);  // every CTA lets the next kernel launch, having waited first
  cluster_barrier();  // the partials are written and visible to CTA 0
  if (parts > 1 && r == 0) {
    __syncthreads();  // smem is free for merge_cells' stage
    merge_cells<D, G>(a, reinterpret_cast<float*>(smem), b, hk, parts,
                      [&](int i) { return cell0 + i; });
  }
}

}  // namespace nanovllm::kernels::cuda::decode
