// What every decode-attention compute path shares: the cp.async ring that streams one run of
// context tiles through shared memory (kStages - 1 tiles in flight while one is computed), and
// the end of a run: the per-group (lane group or warp) softmax states merged through shared
// memory and written as the output or as a split partial. Included only by the
// decode_attention*.cu/cuh files (kept apart to keep files small).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"

namespace nanovllm::kernels::cuda::decode {

// The slots of a ring of kStages tiles, kept by the loops (no t % kStages per tile): the next
// tile's, and the previous tile's (the one a refill takes).
template <int kStages>
__device__ __forceinline__ int ring_next_slot(int slot) {
  return slot + 1 == kStages ? 0 : slot + 1;
}
template <int kStages>
__device__ __forceinline__ int ring_prev_slot(int slot) {
  return slot == 0 ? kStages - 1 : slot - 1;
}

// The end of a ring's run: only empty groups can be pending; keep the ring quiet anyway, then
// free its shared memory.
__device__ __forceinline__ void ring_drain() {
  cp_async_wait<0>();
  __syncthreads();
}

// Tiles [first_tile, first_tile + ntiles) of kv head hk of sequence b (ctx tokens) through the
// ring in smem: the K slots [kStages][kTokens, D], then the V slots, then (fp8) the exponents
// [kStages][2, kTokens]. CTA-uniform use: prologue(), then acquire(t, t % kStages) for
// t = 0 .. ntiles - 1 (each followed by the compute of that slot), then drain() before smem is
// reused.
template <int D, int FP8, bool SWIZZLE>
struct TileRing {
  using L = Layout<D, FP8>;
  static constexpr int kStages = L::kStages;
  const DecodeArgs& a;
  const int32_t* bt;
  unsigned char* k_ring;
  unsigned char* v_ring;
  int8_t* e_ring;
  int hk, ctx, first_tile, ntiles;
  bool one_page;  // every tile within one cache block (load_tile)

  __device__ TileRing(const DecodeArgs& args, float4* smem, int b, int hk_, int ctx_, int first,
                      int n)
      : a(args),
        bt(args.block_tables + b * args.bt_stride),
        k_ring(reinterpret_cast<unsigned char*>(smem)),
        v_ring(k_ring + kStages * L::kTileBytes),
        e_ring(reinterpret_cast<int8_t*>(v_ring + kStages * L::kTileBytes)),
        hk(hk_),
        ctx(ctx_),
        first_tile(first),
        ntiles(n),
        one_page(args.block_size % L::kTokens == 0) {}

  __device__ void load(int t, int slot) const {
    load_tile<D, FP8, SWIZZLE>(a, bt, hk, (first_tile + t) * L::kTokens, ctx, one_page,
                               k_ring + slot * L::kTileBytes, v_ring + slot * L::kTileBytes,
                               e_ring + slot * L::kExpBytes);
  }

  // Fills kStages - 1 slots. Every thread commits one group per slot, empty or not, so the
  // group count (and cp_async_wait's meaning) is the same everywhere. waited (CTA-uniform):
  // whether this CTA has waited for the previous kernel yet; if not, the tiles that kernel
  // cannot have written (all but the sequence's last, which holds the new token's k and v)
  // are put in flight first and the wait comes only before the last tile or the query (that
  // kernel's output): the cache reads overlap its tail. Waited on return.
  __device__ void prologue(bool& waited) const {
    const int last_tile = context_tiles<D>(ctx) - 1;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < ntiles && first_tile + s == last_tile) wait_once(waited);
      if (s < ntiles) load(s, s);
      cp_async_commit();
    }
    wait_once(waited);
  }

  // Returns once tile t (in `slot` = t % kStages, which the caller keeps with next_slot: no
  // division in the loop) has landed for every thread and everyone is done with tile t - 1,
  // whose slot is refilled with tile t + kStages - 1.
  __device__ void acquire(int t, int slot) const {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int nt = t + kStages - 1;
    if (nt < ntiles) load(nt, ring_prev_slot<kStages>(slot));
    cp_async_commit();
  }
  __device__ static int next_slot(int slot) {
    return ring_next_slot<kStages>(slot);
  }

  __device__ const unsigned char* k(int slot) const {
    return k_ring + slot * L::kTileBytes;
  }
  __device__ const unsigned char* v(int slot) const {
    return v_ring + slot * L::kTileBytes;
  }
  __device__ const int8_t* exps(int slot) const {
    return e_ring + slot * L::kExpBytes;
  }

  __device__ void drain() const {
    ring_drain();
  }
};

// Shared memory of the end of a run: NG groups' states, sm_acc [NG][G][D] (unnormalised, in
// the base of sm_m), sm_m and sm_l [NG][G], all f32, laid out from the start of smem.
template <int D, int G, int NG>
struct GroupStates {
  float* acc;
  float* m;
  float* l;
  __device__ explicit GroupStates(float4* smem)
      : acc(reinterpret_cast<float*>(smem)), m(acc + NG * G * D), l(m + NG * G) {}
};

// Query head g, dim d of kv head hk of sequence b, merged to o over weights summing to sum
// from base mx: cell < 0 writes the bf16 output, else the normalised partial and (d == 0) its
// log2-sum-exp into scratch cell `cell`.
template <int D, int G>
__device__ __forceinline__ void store_merged(const DecodeArgs& a, int b, int hk, int64_t cell,
                                             int g, int d, float o, float sum, float mx) {
  const float val = sum > 0.f ? o / sum : 0.f;
  if (cell < 0) {
    a.out[b * a.out_tok + (hk * G + g) * a.out_head + d] = to_bf16(val);
  } else {
    a.split_out[(cell * G + g) * D + d] = val;
    if (d == 0) a.split_lse[cell * G + g] = sum > 0.f ? mx + log2f(sum) : -INFINITY;
  }
}

// After every group stored its state and a __syncthreads: query heads hk * G .. of sequence
// b merged over the groups; cell < 0 writes the bf16 output, else the normalised partial and
// its log2-sum-exp into scratch cell `cell`.
template <int D, int G, int NG>
__device__ void write_merged(const DecodeArgs& a, const GroupStates<D, G, NG>& st, int b, int hk,
                             int64_t cell) {
  for (int idx = threadIdx.x; idx < G * D; idx += kThreads) {
    const int g = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < NG; ++i) mx = fmaxf(mx, st.m[i * G + g]);
    float sum = 0.f, o = 0.f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int i = 0; i < NG; ++i) {
        const float w = fast_exp2(st.m[i * G + g] - mx);
        sum += st.l[i * G + g] * w;
        o += st.acc[(i * G + g) * D + d] * w;
      }
    }
    store_merged<D, G>(a, b, hk, cell, g, d, o, sum, mx);
  }
}

}  // namespace nanovllm::kernels::cuda::decode
