// Merging the partials of one split (sequence, kv head) group by their log2-sum-exp: run by
// the last CTA to finish a piece of the group (fused: merge_if_last) or by the merge kernel
// (no counters).
// The partials come from other CTAs' writes, so they are read through L2 (__ldcg), never a
// possibly stale L1 line.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_plan.cuh"

namespace nanovllm::kernels::cuda::decode {

// acc / l into the 4 output dims of float4 column col of kv head hk's [G, D] out rows.
template <int D, int G>
__device__ __forceinline__ void store_out4(const DecodeArgs& a, int b, int hk, int col,
                                           const float4& acc, float l) {
  const int g = col / (D / 4);
  bf16* o = a.out + b * a.out_tok + (hk * G + g) * a.out_head + (col % (D / 4)) * 4;
  const float inv = 1.f / l;
  o[0] = to_bf16(acc.x * inv);
  o[1] = to_bf16(acc.y * inv);
  o[2] = to_bf16(acc.z * inv);
  o[3] = to_bf16(acc.w * inv);
}

// Out rows of kv head hk of sequence b = the lse-weighted mean of the n partials in scratch cells
// cell_of(0) .. cell_of(n - 1). Block-wide, CTA-uniform call; stage: >= kThreads * 24 bytes of
// shared memory.
//
// Each thread owns one float4 column of the [G, D] partial and a slice of the CTAs (a strided
// subset; at G * D = 256, Qwen3's shape, two slices) and merges online, kBatch partials at a
// time: their loads are issued back to back (__ldcg is volatile asm, kept in order, which a
// plain loop would interleave with the arithmetic), so a merge of many partials costs a few L2
// round trips, not one per partial. The slices are then merged through shared memory.
// (Measured on an H200: float2 columns in one slice, or batches of 16, were no faster.)
template <int D, int G, class CellOf>
__device__ __forceinline__ void merge_cells(const DecodeArgs& a, float* stage, int b, int hk, int n,
                                            const CellOf& cell_of) {
  constexpr int kCols = G * D / 4;  // float4 columns of one partial
  constexpr int kSlices = kCols >= kThreads ? 1 : kThreads / kCols;
  constexpr int kBatch = 8;
  float4* const st_acc = reinterpret_cast<float4*>(stage);  // [kSlices][kCols]
  float* const st_m = stage + 4 * kSlices * kCols;          // [kSlices][kCols]
  float* const st_l = st_m + kSlices * kCols;               // [kSlices][kCols]
  for (int c = threadIdx.x; c < kCols * kSlices; c += kThreads) {
    const int col = c % kCols, slice = c / kCols, g = col / (D / 4);
    float m = -INFINITY, l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int i0 = slice; i0 < n; i0 += kBatch * kSlices) {
      float lse[kBatch];
      float4 v[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int i = i0 + k * kSlices;
        lse[k] = -INFINITY;  // past n: weight 0
        v[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (i < n) {
          const int64_t cell = cell_of(i);
          lse[k] = __ldcg(a.split_lse + cell * G + g);
          v[k] = __ldcg(reinterpret_cast<const float4*>(a.split_out + cell * G * D) + col);
        }
      }
      float m_new = m;  // finite: i0 < n, and every piece has a valid token
#pragma unroll
      for (int k = 0; k < kBatch; ++k) m_new = fmaxf(m_new, lse[k]);
      const float keep = fast_exp2(m - m_new);  // m = -inf -> 0
      l *= keep;
      acc.x *= keep;
      acc.y *= keep;
      acc.z *= keep;
      acc.w *= keep;
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const float w = fast_exp2(lse[k] - m_new);
        l += w;
        acc.x += w * v[k].x;
        acc.y += w * v[k].y;
        acc.z += w * v[k].z;
        acc.w += w * v[k].w;
      }
      m = m_new;
    }
    if constexpr (kSlices == 1) {
      store_out4<D, G>(a, b, hk, col, acc, l);
    } else {
      st_acc[c] = acc;
      st_m[c] = m;
      st_l[c] = l;
    }
  }
  if constexpr (kSlices > 1) {
    __syncthreads();
    for (int col = threadIdx.x; col < kCols; col += kThreads) {
      float mx = -INFINITY;
#pragma unroll
      for (int s = 0; s < kSlices; ++s) mx = fmaxf(mx, st_m[s * kCols + col]);
      float l = 0.f;
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < kSlices; ++s) {
        const float w = fast_exp2(st_m[s * kCols + col] - mx);  // empty slice: m = -inf -> 0
        const float4 v = st_acc[s * kCols + col];
        l += st_l[s * kCols + col] * w;
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
      }
      store_out4<D, G>(a, b, hk, col, acc, l);
    }
  }
}

// merge_cells over the n partials of CTAs j0 .. j0 + n - 1 (the group's first unit is
// group_begin): j0's piece begins its range only when the group begins exactly there; later
// CTAs' pieces always begin theirs.
template <int D, int G>
__device__ void merge_group(const DecodeArgs& a, float* stage, int b, int hk, int64_t group_begin,
                            int64_t j0, int n, const Deal& deal) {
  const int64_t cell0 = partial_cell(deal, j0, group_begin);
  merge_cells<D, G>(a, stage, b, hk, n,
                    [&](int i) { return i == 0 ? cell0 : 2 * (j0 + static_cast<int64_t>(i)); });
}

// Release / acquire at GPU scope, lighter than __threadfence's sequentially consistent fence.
__device__ __forceinline__ void fence_acq_rel_gpu() {
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}

// After CTA j wrote its partial of a split group: counts it on the group's counter (indexed by
// the group's first CTA j0); the CTA that completes the count resets the counter for the next
// call and merges. Ordering as in cooperative groups' grid sync: the barrier gathers the CTA's
// partial writes, thread 0's fence releases them before its count, and the last CTA's fence
// after seeing the full count acquires everyone's before it reads them.
// smem: merge_group's stage (kThreads * 24 bytes).
template <int D, int G>
__device__ void merge_if_last(const DecodeArgs& a, float4* smem, PlanSmem* ps, int b, int hk,
                              int64_t group_begin, int64_t group_end, const Deal& deal) {
  __syncthreads();
  const int64_t j0 = cta_of(deal, group_begin);
  const int n = static_cast<int>(cta_of(deal, group_end - 1) - j0 + 1);
  if (threadIdx.x == 0) {
    fence_acq_rel_gpu();
    const bool last = atomicAdd(a.split_counters + j0, 1) == n - 1;
    if (last) {
      fence_acq_rel_gpu();
      a.split_counters[j0] = 0;  // every piece has counted: nobody touches it until next call
    }
    ps->flag = last;
  }
  __syncthreads();
  if (ps->flag)
    merge_group<D, G>(a, reinterpret_cast<float*>(smem), b, hk, group_begin, j0, n, deal);
}

}  // namespace nanovllm::kernels::cuda::decode
