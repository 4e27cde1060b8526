// The decode-attention tile: how kTokens cache rows of one kv head sit in a shared-memory
// ring slot, which lanes compute on which row, the kernel arguments, and the cp.async loader
// that fills a slot from the paged cache. Included only by the decode_attention*.cu/cuh files
// (kept apart to keep files small).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/paged_attention_args.cuh"

namespace nanovllm::kernels::cuda::decode {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kSteps = 4;   // tokens per lane group per tile
constexpr int kStages = 3;  // tiles resident in the shared-memory ring

template <int D>
struct Layout {
  static constexpr int kLanes = D / 8;              // lanes sharing one token row
  static constexpr int kRows = 32 / kLanes;         // token rows per warp per step
  static constexpr int kGroups = kWarps * kRows;    // lane groups per CTA
  static constexpr int kTokens = kGroups * kSteps;  // tokens per tile
  static constexpr int kTileElems = kTokens * D;    // bf16 per K (or V) tile
  static constexpr int kChunks = kTokens * kLanes;  // 16-byte pieces per K (or V) tile
  static constexpr int kChunksPerThread = kChunks / kThreads;
  static constexpr int kSmemBytes = 2 * kStages * kTileElems * 2;
  static_assert(kChunks % kThreads == 0);
  static_assert(kSmemBytes <= 48 * 1024, "static shared memory is limited to 48 KB");
};

// Every decode kernel is started by launch_dependent (common.cuh): it waits for the previous
// kernel (the q / k / v producer) before touching memory, then lets the next one launch.
__device__ __forceinline__ void wait_then_allow_next() {
  wait_for_previous_grid();
  allow_next_grid();
}

// The same, once per CTA (waited is CTA-uniform), for the split kernel, which may read what
// the previous kernel cannot have written before it waits. Why that is safe: the previous
// kernel (the q / k / v producer) lets us launch only after its own wait, so every kernel
// before it has completed when we start; it writes q and the new token's cache row only.
__device__ __forceinline__ void wait_once(bool& waited) {
  if (waited) return;
  wait_then_allow_next();
  waited = true;
}

// The paged operands (rows = B: one query per sequence), then the decode's own.
struct DecodeArgs : PagedAttentionArgs {
  const int32_t* context_lens;  // [B]
  float* split_out;             // [cells, G, D] contiguous: partial outputs, normalised
  float* split_lse;             // [cells, G] contiguous: their log2-sum-exp
  int* split_counters;          // [>= gridDim.x] zero between calls; null: a merge kernel
  int batch;
  int block_shift;  // log2(block_size) when it is a power of two, else -1
};

// Tiles of a context of ctx tokens (none for ctx <= 0: padding rows).
template <int D>
__device__ __forceinline__ int context_tiles(int ctx) {
  return (max(ctx, 0) + Layout<D>::kTokens - 1) / Layout<D>::kTokens;
}

// Issues the cp.async copies of one tile (tokens tok0 .. tok0 + kTokens - 1) of kv head hk
// into k_dst / v_dst ([kTokens, D] bf16 each). Tokens at or past ctx are zero-filled without
// touching memory, so the compute may read the whole tile.
template <int D>
__device__ __forceinline__ void load_tile(const DecodeArgs& a, const int32_t* bt, int hk, int tok0,
                                          int ctx, bf16* k_dst, bf16* v_dst) {
  using L = Layout<D>;
  const int64_t row = static_cast<int64_t>(a.hkv) * D;  // elements per cache slot
#pragma unroll
  for (int i = 0; i < L::kChunksPerThread; ++i) {
    const int c = i * kThreads + threadIdx.x;
    const int t = c / L::kLanes, piece = c % L::kLanes;
    const int tok = tok0 + t;
    const bool valid = tok < ctx;
    int64_t off = 0;
    if (valid) {
      int page, in_page;
      if (a.block_shift >= 0) {
        page = tok >> a.block_shift;
        in_page = tok & (a.block_size - 1);
      } else {
        page = tok / a.block_size;
        in_page = tok % a.block_size;
      }
      const int64_t slot = static_cast<int64_t>(bt[page]) * a.block_size + in_page;
      off = slot * row + hk * D + piece * 8;
    }
    cp_async16(k_dst + c * 8, a.k_cache + off, valid);
    cp_async16(v_dst + c * 8, a.v_cache + off, valid);
  }
}

}  // namespace nanovllm::kernels::cuda::decode
