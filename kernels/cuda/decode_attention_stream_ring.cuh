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

// The ring of Layout<D, true> over n units from a first one on; CTA-uniform use as TileRing's:
// prologue(), acquire(i, slot) for i = 0 .. n - 1, drain(). Every thread walks the units it
// loads itself (the same walk everywhere), keeping the group's block-table row, so that a load
// inside a group costs what TileRing's does: positions read from shared memory after each
// barrier, or the walk redone from the sequence every tile, were 8-13 % slower.
template <int D>
struct StreamRing {
  using L = Layout<D, true>;
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

  __device__ StreamRing(const DecodeArgs& args, float4* smem, UnitPos first, int units)
      : a(args),
        k_ring(reinterpret_cast<unsigned char*>(smem)),
        v_ring(k_ring + kStages * L::kTileBytes),
        e_ring(reinterpret_cast<int8_t*>(v_ring + kStages * L::kTileBytes)),
        bt(args.block_tables + first.b * args.bt_stride),
        next(first),
        n(units),
        one_page(args.block_size % L::kTokens == 0) {}

  __device__ void load_next(int slot) {
    load_tile<D, true, true>(a, bt, next.hk, next.tile * L::kTokens, next.ctx, one_page,
                             k_ring + slot * L::kTileBytes, v_ring + slot * L::kTileBytes,
                             e_ring + slot * L::kExpBytes);
    // Inside a group only the tile steps; past its end, next_unit (given the group's last tile)
    // moves on to the next group or sequence. (Calling next_unit every time reads simpler but
    // compiles to other code, not yet timed on a GPU.)
    if (++issued < n && ++next.tile == next.tiles) {
      const int b = next.b;
      next = next_unit<D>(a, UnitPos{next.b, next.ctx, next.tiles, next.hk, next.tile - 1});
      if (next.b != b) bt = a.block_tables + next.b * a.bt_stride;
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
