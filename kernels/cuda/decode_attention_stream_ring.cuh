// The streaming decode path's ring (decode_attention_stream.cuh): where a unit's tile is, the
// walk over units in plan order, and the cp.async ring that loads a CTA's whole range of units
// across its pieces. Included only by decode_attention_stream.cuh (kept apart to keep files
// small).
#pragma once

#include <cstdint>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/decode_attention_ring.cuh"
#include "kernels/cuda/decode_attention_tile.cuh"

namespace nanovllm::kernels::cuda::decode {

// Where a unit's tile is: tile `tile` of kv head hk of sequence b (ctx tokens, `tiles` tiles).
struct UnitPos {
  int b, ctx, tiles, hk, tile;
  __device__ bool group_last() const { return tile + 1 == tiles; }
};

// Unit u of sequence b (length ctx), whose first unit is seq_first.
template <int D>
__device__ __forceinline__ UnitPos unit_pos(int b, int ctx, int64_t seq_first, int64_t u) {
  const int tiles = context_tiles<D>(ctx);
  const int rel = static_cast<int>(u - seq_first);  // a sequence's units fit an int
  return UnitPos{b, ctx, tiles, rel / tiles, rel % tiles};
}

// The unit after p in plan order; there must be one (sequences without units are skipped).
template <int D>
__device__ __forceinline__ UnitPos next_unit(const DecodeArgs& a, UnitPos p) {
  if (++p.tile < p.tiles) return p;
  p.tile = 0;
  if (++p.hk < a.hkv) return p;
  p.hk = 0;
  do {
    p.ctx = a.context_lens[++p.b];
  } while (context_tiles<D>(p.ctx) == 0);
  p.tiles = context_tiles<D>(p.ctx);
  return p;
}

// The ring of Layout<D, k8bit> (k8bit: an 8-bit cache, its rows' exponents beside them; else
// bf16) over n units from a first one on; CTA-uniform use as TileRing's:
// prologue(), acquire(i, slot) for i = 0 .. n - 1, drain(). Every thread walks the units it
// loads itself (the same walk everywhere), keeping the group's block-table row and (one_page)
// the next tile's offsets, so that a load inside a group is a few adds: positions read from
// shared memory after each barrier, or the walk redone from the sequence every tile, were 8-13 %
// slower; load_tile's offsets recomputed every tile cost 2.5-6 % (bench/results/h200-2026-11-27-
// issue34_stepped_loader.txt).
template <int D, bool k8bit>
struct StreamRing {
  using L = Layout<D, k8bit>;
  static constexpr int kStages = L::kStages;
  static constexpr int kRingBytes = kStages * (2 * L::kTileBytes + L::kExpBytes);
  const DecodeArgs& a;
  unsigned char* k_ring;
  unsigned char* v_ring;
  int8_t* e_ring;
  const int32_t* bt;  // the next unit's block-table row
  UnitPos next;       // the unit the next load brings
  int n, issued = 0;
  bool one_page;
  // one_page (block_size a multiple of the tile): where the next unit's tile is, as byte
  // offsets of its first row at kv head next.hk and of its first exponent, with its page and
  // row; a step inside a group adds a tile's bytes and reads the block table only at a new page
  // (load_tile computes all of it for every tile: ncu counted ~100 of the loop's ~255
  // instructions a tile in that loader at batch 256).
  int64_t tile_off = 0, tile_exp = 0;
  int page = 0, row = 0;

  __device__ StreamRing(const DecodeArgs& args, float4* smem, UnitPos first, int units)
      : a(args),
        k_ring(reinterpret_cast<unsigned char*>(smem)),
        v_ring(k_ring + kStages * L::kTileBytes),
        e_ring(reinterpret_cast<int8_t*>(v_ring + kStages * L::kTileBytes)),
        bt(args.block_tables + first.b * args.bt_stride),
        next(first),
        n(units),
        one_page(args.block_size % L::kTokens == 0) {
    if (one_page) locate_next();
  }

  __device__ int64_t slot_bytes() const { return static_cast<int64_t>(a.hkv) * L::kRowBytes; }
  // one_page: tile_off, tile_exp, page and row of `next` from its block-table row.
  __device__ void locate_next() {
    page_of(a, next.tile * L::kTokens, page, row);
    at_page();
  }
  __device__ void at_page() {
    const int64_t block = bt[page];
    tile_off = (block * a.block_size + row) * slot_bytes() + next.hk * L::kRowBytes;
    tile_exp = (block * a.hkv + next.hk) * a.block_size + row;
  }
  // one_page: `next` moved one tile on inside its group.
  __device__ void step_in_group() {
    row += L::kTokens;
    if (row == a.block_size) {
      ++page;
      row = 0;
      at_page();
    } else {
      tile_off += L::kTokens * slot_bytes();
      tile_exp += L::kTokens;
    }
  }
  // load_tile's one-page copies of `next`, from the stepped offsets. (load_tile keeps its own
  // per-copy form: routing it through this one changes the PTX of every piece-by-piece decode
  // kernel, which were timed with it.)
  __device__ void load_stepped(int slot) {
    const auto* k_src = static_cast<const unsigned char*>(a.k_cache);
    const auto* v_src = static_cast<const unsigned char*>(a.v_cache);
    unsigned char* const k_dst = k_ring + slot * L::kTileBytes;
    unsigned char* const v_dst = v_ring + slot * L::kTileBytes;
    const int tok0 = next.tile * L::kTokens;
#pragma unroll
    for (int i = 0; i < L::kChunksPerThread; ++i) {
      const int c = i * kThreads + threadIdx.x;
      const int t = c * 16 / L::kRowBytes, piece_byte = c * 16 % L::kRowBytes;
      const bool valid = tok0 + t < next.ctx;
      const int64_t off = valid ? tile_off + t * slot_bytes() + piece_byte : 0;
      const int dst = t * L::kRowBytes + swizzled_chunk(t, piece_byte / 16) * 16;
      cp_async16(k_dst + dst, k_src + off, valid);
      cp_async16(v_dst + dst, v_src + off, valid);
    }
    if constexpr (k8bit) {
      if (threadIdx.x < 2 * L::kExpPieces) {
        const bool is_v = threadIdx.x >= L::kExpPieces;
        const int piece = threadIdx.x - (is_v ? L::kExpPieces : 0);
        const bool valid = tok0 + 4 * piece < next.ctx;
        const int64_t off = valid ? tile_exp + 4 * piece : 0;
        cp_async4(e_ring + slot * L::kExpBytes + (is_v ? L::kTokens : 0) + 4 * piece,
                  (is_v ? a.v_scale : a.k_scale) + off, valid);
      }
    }
  }

  __device__ void load_next(int slot) {
    if (one_page)
      load_stepped(slot);
    else
      load_tile<D, k8bit, true>(a, bt, next.hk, next.tile * L::kTokens, next.ctx, false,
                                k_ring + slot * L::kTileBytes, v_ring + slot * L::kTileBytes,
                                e_ring + slot * L::kExpBytes);
    // Inside a group only the tile steps; past its end, next_unit (given the group's last tile)
    // moves on to the next group or sequence. (Calling next_unit every time reads simpler but
    // compiles to other code, not yet timed on a GPU.)
    if (++issued < n) {
      if (++next.tile == next.tiles) {
        const int b = next.b;
        next = next_unit<D>(a, UnitPos{next.b, next.ctx, next.tiles, next.hk, next.tile - 1});
        if (next.b != b) bt = a.block_tables + next.b * a.bt_stride;
        if (one_page) locate_next();
      } else if (one_page) {
        step_in_group();
      }
    }
  }
  // A group's last tile holds the previous kernel's new token: the wait for that kernel comes
  // before it (the caller waits before the first acquire, so only the prologue checks).
  __device__ void prologue(bool& waited) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n) {
        if (next.group_last()) wait_once(waited);
        load_next(s);
      }
      cp_async_commit();
    }
  }
  // As TileRing::acquire: unit i has landed in `slot` and everyone is done with unit i - 1,
  // whose slot takes unit i + kStages - 1; extra(), called between the barrier and the commit,
  // may add copies of its own to that unit's commit group.
  template <class Extra>
  __device__ void acquire(int i, int slot, Extra&& extra) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (i + kStages - 1 < n) load_next(ring_prev_slot<kStages>(slot));
    extra();
    cp_async_commit();
  }
  __device__ static int next_slot(int slot) {
    return ring_next_slot<kStages>(slot);
  }
  __device__ void drain() const {
    ring_drain();
  }
};

}  // namespace nanovllm::kernels::cuda::decode
