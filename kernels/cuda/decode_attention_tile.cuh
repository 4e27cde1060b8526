// The decode-attention tile: how kTokens cache rows of one kv head sit in a shared-memory
// ring slot, which lanes compute on which row, the kernel arguments, and the cp.async loader
// that fills a slot from the paged cache (bf16, or fp8 rows with their exponents). Included
// only by the decode_attention*.cu/cuh files (kept apart to keep files small).
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/paged_attention_args.cuh"

namespace nanovllm::kernels::cuda::decode {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kSteps = 4;   // tokens per lane group per tile
constexpr int kStages = 3;  // bf16 tiles resident in the shared-memory ring

// FP8: the cache holds fp8 rows, each with an exponent (kernels/fp8.h). A lane still owns 8
// dims of a row (8 bytes instead of 16), so the tile's tokens and the plan are the same; the
// tiles are half the bytes, so the ring holds 5 of them, to keep as many bytes in flight as
// bf16's 3. Each slot also holds the tile's kTokens K exponents, then its V ones.
template <int D, int FP8 = false>
struct Layout {
  static constexpr int kLanes = D / 8;              // lanes sharing one token row
  static constexpr int kRows = 32 / kLanes;         // token rows per warp per step
  static constexpr int kGroups = kWarps * kRows;    // lane groups per CTA
  static constexpr int kTokens = kGroups * kSteps;  // tokens per tile
  static constexpr int kElemBytes = FP8 ? 1 : 2;
  static constexpr int kRowBytes = D * kElemBytes;        // one cached row of one kv head
  static constexpr int kTileBytes = kTokens * kRowBytes;  // per K (or V) tile
  static constexpr int kChunks = kTileBytes / 16;         // 16-byte pieces per K (or V) tile
  static constexpr int kChunksPerThread = kChunks / kThreads;
  static constexpr int kStages = FP8 ? 5 : decode::kStages;
  static constexpr int kExpBytes = FP8 ? 2 * kTokens : 0;  // per slot: K's, then V's
  static constexpr int kExpPieces = kTokens / 4;           // 4-byte copies per K (or V)
  // The same for both: bf16's ring (the merge buffers and the plan need that much anyway).
  static constexpr int kSmemBytes = 2 * decode::kStages * kTokens * D * 2;
  static_assert(kChunks % kThreads == 0);
  static_assert(2 * kExpPieces <= kThreads);
  static_assert(kStages * (2 * kTileBytes + kExpBytes) <= kSmemBytes);
  static_assert(kSmemBytes <= 48 * 1024, "static shared memory is limited to 48 KB");
};

// Every decode kernel is started by launch_dependent (common.cuh): it waits for the previous
// kernel (the q / k / v producer) before touching memory, then lets the next one launch.
__device__ __forceinline__ void wait_then_allow_next() {
  wait_for_previous_grid();
  allow_next_grid();
}

// The same, once per CTA (waited is CTA-uniform), for the split and cluster kernels, which read
// ahead of their wait. Why that is safe: ahead of it a CTA reads only the context lengths and
// block tables (copied in before the step's first kernel) and the cache rows of earlier
// positions (written in earlier steps), and writes only shared memory. The kernel before it
// (q / k norm + rotary) writes q and the new token's cache rows, which are read after the wait,
// as every global write is made after it. That kernel lets us launch at its start
// (kernels/cuda/rotary.cu's rope_allows_first), so other kernels before it may still run when we
// start; none of them writes what we read ahead of the wait, and every one has completed when
// the wait returns (each waits for the one before it).
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

// Tiles of a context of ctx tokens (none for ctx <= 0: padding rows). The same for bf16 and
// fp8 (one kTokens).
template <int D>
__device__ __forceinline__ int context_tiles(int ctx) {
  return (max(ctx, 0) + Layout<D>::kTokens - 1) / Layout<D>::kTokens;
}

// Token tok's block-table page and row in it.
__device__ __forceinline__ void page_of(const DecodeArgs& a, int tok, int& page, int& in_page) {
  if (a.block_shift >= 0) {
    page = tok >> a.block_shift;
    in_page = tok & (a.block_size - 1);
  } else {
    page = tok / a.block_size;
    in_page = tok % a.block_size;
  }
}

// Where 16-byte chunk `chunk` of tile row `row` sits in a ring slot's row when the tile is
// swizzled (the tensor-core path, decode_attention_mma.cuh): the chunk index's low 3 bits are
// XORed with a function of the row's low 3 bits, so that both of that path's fragment reads,
// 8 lanes on 2 adjacent rows and 8 lanes on 4 even (or odd) rows, hit 8 different 16-byte bank
// groups: rows 2r and 2r + 1 differ in bit 2 of the mask, rows 0, 2, 4, 6 in bits 0-1.
__device__ __forceinline__ int swizzled_chunk(int row, int chunk) {
  return chunk ^ (((row >> 1) & 3) | ((row & 1) << 2));
}

// Issues the cp.async copies of one tile (tokens tok0 .. tok0 + kTokens - 1) of kv head hk
// into k_dst / v_dst ([kTokens, D] elements each) and, fp8, the rows' exponents into e_dst
// ([2, kTokens] i8: K's, V's). Tokens at or past ctx are zero-filled without touching memory,
// so the compute may read the whole tile. An exponent copy moves 4 adjacent tokens of one
// block (block_size is a multiple of 4, tok0 too): one whose first token is valid may bring
// up to 3 tokens past ctx, whose scores are masked and whose V rows are zero. SWIZZLE: rows'
// chunks land where swizzled_chunk puts them (the exponents are not swizzled).
//
// one_page (CTA-uniform): block_size is a multiple of kTokens, so the whole tile lies in one
// block and one block-table read and one slot serve every copy of the thread (tok0 < ctx: a
// run's tiles start inside its context). Why: the per-copy page lookups, 64-bit slot products
// and the division path were about 40 % of the fp8 tensor-core loop's instructions (SASS).
template <int D, int FP8, bool SWIZZLE = false>
__device__ __forceinline__ void load_tile(const DecodeArgs& a, const int32_t* bt, int hk, int tok0,
                                          int ctx, bool one_page, unsigned char* k_dst,
                                          unsigned char* v_dst, int8_t* e_dst) {
  using L = Layout<D, FP8>;
  const int64_t slot_bytes = static_cast<int64_t>(a.hkv) * L::kRowBytes;
  const auto* k_src = static_cast<const unsigned char*>(a.k_cache);
  const auto* v_src = static_cast<const unsigned char*>(a.v_cache);
  // one_page: byte offsets of tok0's row (kv head 0) in the cache and of its exponent (kv head
  // hk); a copy adds its row's 32-bit offset within the tile.
  int64_t tile_off = 0, tile_exp = 0;
  if (one_page) {
    int page, row;
    page_of(a, tok0, page, row);
    tile_off = (static_cast<int64_t>(bt[page]) * a.block_size + row) * slot_bytes;
    if constexpr (FP8)
      tile_exp = (static_cast<int64_t>(bt[page]) * a.hkv + hk) * a.block_size + row;
  }
#pragma unroll
  for (int i = 0; i < L::kChunksPerThread; ++i) {
    const int c = i * kThreads + threadIdx.x;
    const int t = c * 16 / L::kRowBytes, piece_byte = c * 16 % L::kRowBytes;
    const int tok = tok0 + t;
    const bool valid = tok < ctx;
    int64_t off = 0;
    if (one_page) {
      const int rel = t * static_cast<int>(slot_bytes) + hk * L::kRowBytes + piece_byte;
      off = valid ? tile_off + rel : 0;
    } else if (valid) {
      int page, in_page;
      page_of(a, tok, page, in_page);
      const int64_t slot = static_cast<int64_t>(bt[page]) * a.block_size + in_page;
      off = slot * slot_bytes + hk * L::kRowBytes + piece_byte;
    }
    const int dst = SWIZZLE ? t * L::kRowBytes + swizzled_chunk(t, piece_byte / 16) * 16 : c * 16;
    cp_async16(k_dst + dst, k_src + off, valid);
    cp_async16(v_dst + dst, v_src + off, valid);
  }
  if constexpr (FP8) {
    if (threadIdx.x < 2 * L::kExpPieces) {
      const bool is_v = threadIdx.x >= L::kExpPieces;
      const int piece = threadIdx.x - (is_v ? L::kExpPieces : 0);
      const int tok = tok0 + 4 * piece;
      const bool valid = tok < ctx;
      int64_t off = 0;
      if (one_page) {
        off = valid ? tile_exp + 4 * piece : 0;
      } else if (valid) {
        int page, in_page;
        page_of(a, tok, page, in_page);
        off = (static_cast<int64_t>(bt[page]) * a.hkv + hk) * a.block_size + in_page;
      }
      cp_async4(e_dst + (is_v ? L::kTokens : 0) + 4 * piece, (is_v ? a.v_scale : a.k_scale) + off,
                valid);
    }
  }
}

}  // namespace nanovllm::kernels::cuda::decode
