// The consumer warpgroups of the Hopper prefill kernel: one warpgroup owns 64 of the CTA's 128
// query rows and, per K/V tile, runs S = Q K^T (wgmma, both operands in shared memory), the
// online softmax in registers (f32, log2 domain) and O += P V (wgmma, P from registers rounded
// to bf16 as FlashAttention does, V transposed from shared memory).
//
// The main loop overlaps the exponentials with the tensor cores twice, as FlashAttention-3 does:
//   within a warpgroup, tile j's S GEMM and tile j-1's P V GEMM are issued together and tile
//   j's softmax runs while P V does (O's rescale waits for P V);
//   across the two warpgroups (ping-pong), they take turns issuing their GEMMs (named
//   barriers), so one's softmax runs under the other's GEMMs.
// Measured on an H200 (issue 20), causal 8k-32k, before the softmax scale moved into the
// exponent's FMA: 482-505 TFLOP/s with neither, 494-547 with the first, 527-566 with both
// (583-633 with both now).
#pragma once

#include "kernels/cuda/hopper.cuh"
#include "kernels/cuda/prefill_hopper_tiles.cuh"

namespace nanovllm::kernels::cuda::hopper_prefill {

// This thread's place in the accumulator layout: rows row0 and row0 + 8 of the CTA tile.
struct ThreadRows {
  int row0;
  int pos[2];  // their query positions within the chunk
  int t4;      // lane % 4: columns 2 * t4, +1 of each 8-column block
};

// S [64 x 128] = Q [64 x 128] K^T: 8 steps of 16 along the head dim (4 per 64-column half, 32 B
// apart inside the swizzled row).
__device__ __forceinline__ void issue_qk(float (&sc)[64], const unsigned char* q_tile,
                                         const unsigned char* k_tile) {
  wgmma_fence();
#pragma unroll
  for (int kc = 0; kc < kD / 16; ++kc) {
    const int off = (kc >> 2) * kHalfBytes + (kc & 3) * 32;
    wgmma_m64n128k16_ss<0>(sc, smem_desc_sw128(q_tile + off, 16, 1024),
                           smem_desc_sw128(k_tile + off, 16, 1024), kc > 0);
  }
  wgmma_commit();
}

// O [64 x 128] += P [64 x 128 keys] V: V [keys][cols] is B transposed (MN-major), 16 keys
// (2,048 B) per step.
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&pa)[kBlockN / 16][4],
                                         const unsigned char* v_tile) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk)
    wgmma_m64n128k16_rs<1>(o, pa[kk], smem_desc_sw128(v_tile + kk * 2048, kHalfBytes, 1024), 1);
  wgmma_commit();
}

// Masks keys past k_len and above the diagonal and turns S into P = exp2(S * scale_log2 - m)
// in place (the scale folded into one FMA per element; the row maxima taken on raw scores, as
// the scale is positive); m and l move to the tile; corr rescales what O held before.
__device__ __forceinline__ void online_softmax(float (&sc)[64], float (&m_run)[2],
                                               float (&l_run)[2], float (&corr)[2],
                                               const ThreadRows& rows, int n0, int k_len, int past,
                                               int m0, float scale_log2) {
  const bool needs_mask = n0 + kBlockN > k_len || n0 + kBlockN - 1 > past + m0;
  if (needs_mask) {
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      const int j = n0 + (i >> 2) * 8 + 2 * rows.t4 + (i & 1);
      if (j >= k_len || j > past + rows.pos[(i >> 1) & 1]) sc[i] = -INFINITY;
    }
  }
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < 64; ++i) tile_max[(i >> 1) & 1] = fmaxf(tile_max[(i >> 1) & 1], sc[i]);
  float m_scaled[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float m_new = fmaxf(m_run[r], tile_max[r] * scale_log2);  // log2 domain
    m_scaled[r] = m_new == -INFINITY ? 0.f : m_new;  // rows masked so far stay finite
    corr[r] = exp2f(m_run[r] - m_scaled[r]);
    m_run[r] = m_new;
    l_run[r] *= corr[r];
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int r = (i >> 1) & 1;
    sc[i] = exp2f(fmaf(sc[i], scale_log2, -m_scaled[r]));
    l_run[r] += sc[i];
  }
}

__device__ __forceinline__ void rescale(float (&o)[64], const float (&corr)[2]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] *= corr[(i >> 1) & 1];
}

// P as wgmma A fragments: keys 16kk..16kk+15 are accumulator column blocks 2kk and 2kk + 1.
__device__ __forceinline__ void pack_p(uint32_t (&pa)[kBlockN / 16][4], const float (&sc)[64]) {
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
    for (int e = 0; e < 4; ++e) pa[kk][e] = pack_bf16x2(sc[8 * kk + 2 * e], sc[8 * kk + 2 * e + 1]);
}

// Keys past k_len in the last tile hold whatever the cache had (possibly NaN, and 0 * NaN would
// poison O): both warpgroups zero those V rows, whole rows so the swizzle does not matter, and
// make the stores visible to wgmma before either reads the tile.
__device__ __forceinline__ void zero_v_tail(unsigned char* v_tile, int n0, int k_len) {
  if (n0 + kBlockN <= k_len) return;
  const int first = k_len - n0;
  for (int i = threadIdx.x - 128; i < (kBlockN - first) * 16; i += 128 * kConsumers) {
    const int r = first + i / 16, chunk = i % 16;
    *reinterpret_cast<uint4*>(v_tile + (chunk >> 3) * kHalfBytes + r * kRowBytes +
                              (chunk & 7) * 16) = make_uint4(0, 0, 0, 0);
  }
  fence_proxy_async_shared();
  named_barrier_sync(kVZeroedBarrier, 128 * kConsumers);
}

__device__ __forceinline__ void release(uint64_t* empty, int lane) {
  __syncwarp();
  if (lane == 0) mbarrier_arrive(empty);
}

// Ping-pong turns: a warpgroup waits for its turn before issuing GEMMs and hands the turn over
// after; warpgroup 0 goes first.
__device__ __forceinline__ void wait_turn(int c) {
  named_barrier_sync(kTurnBarrier + c, 128 * kConsumers);
}
__device__ __forceinline__ void pass_turn(int c) {
  named_barrier_arrive(kTurnBarrier + (c ^ 1), 128 * kConsumers);
}

// Consumer warpgroup c (0 or 1): rows 64c..64c+63 of the CTA's tile.
__device__ __forceinline__ void consume(unsigned char* smem, const Barriers& bars,
                                        const HopperArgs& a, int c, const CtaWork& w) {
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  ThreadRows rows;
  rows.row0 = c * 64 + warp * 16 + (lane >> 2);
  // Tile row r is head r / P, position r % P; rows from G x P on are padding (never stored).
  rows.pos[0] = w.m0 + rows.row0 % a.positions;
  rows.pos[1] = w.m0 + (rows.row0 + 8) % a.positions;
  rows.t4 = lane & 3;
  const int past = w.k_len - w.q_len;  // keys before the first query (cached prefix)
  const unsigned char* q_tile = smem + kQOffset + c * 64 * kRowBytes;
  auto k_tile = [&](int t) { return smem + kKOffset + (t % kStages) * kTileBytes; };
  auto v_tile = [&](int t) { return smem + kVOffset + (t % kStages) * kTileBytes; };
  auto parity = [](int t) { return static_cast<uint32_t>((t / kStages) & 1); };

  float o[64];  // O [64 rows][128 cols] in wgmma's accumulator layout
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  float sc[64];  // S, then P (f32), of the current tile
  uint32_t pa[kBlockN / 16][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f}, corr[2];
  if (c == 1) pass_turn(c);  // warpgroup 0 goes first
  mbarrier_wait(bars.full_q, 0);

  // Tile 0: S and its softmax alone (O is still zero).
  mbarrier_wait(&bars.full_k[0], 0);
  wait_turn(c);
  issue_qk(sc, q_tile, k_tile(0));
  pass_turn(c);
  wgmma_wait<0>();
  wgmma_fence_operand(sc);
  release(&bars.empty_k[0], lane);
  online_softmax(sc, m_run, l_run, corr, rows, 0, w.k_len, past, w.m0, a.scale_log2);
  pack_p(pa, sc);
  for (int t = 1; t < w.n_tiles; ++t) {
    mbarrier_wait(&bars.full_k[t % kStages], parity(t));
    mbarrier_wait(&bars.full_v[(t - 1) % kStages], parity(t - 1));
    wait_turn(c);
    issue_qk(sc, q_tile, k_tile(t));
    issue_pv(o, pa, v_tile(t - 1));  // tile t-1 is never the last: no tail to zero
    pass_turn(c);
    wgmma_wait<1>();  // S of tile t (committed first) is done; P V may still run
    wgmma_fence_operand(sc);
    release(&bars.empty_k[t % kStages], lane);
    online_softmax(sc, m_run, l_run, corr, rows, t * kBlockN, w.k_len, past, w.m0, a.scale_log2);
    wgmma_wait<0>();
    wgmma_fence_operand(o);
    release(&bars.empty_v[(t - 1) % kStages], lane);
    rescale(o, corr);
    pack_p(pa, sc);
  }
  const int last = w.n_tiles - 1;
  mbarrier_wait(&bars.full_v[last % kStages], parity(last));
  zero_v_tail(v_tile(last), last * kBlockN, w.k_len);
  wait_turn(c);
  issue_pv(o, pa, v_tile(last));
  if (c == 0) pass_turn(c);  // warpgroup 1 is last: no turn left to pass
  wgmma_wait<0>();
  wgmma_fence_operand(o);
  release(&bars.empty_v[last % kStages], lane);

  // Normalise and store this thread's two rows (padding rows past q_len are dropped).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int head_in_group = (rows.row0 + 8 * r) / a.positions;
    if (rows.pos[r] >= w.q_len || head_in_group >= a.group) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int head = w.hk * a.group + head_in_group;
    bf16* dst = a.out + (w.q_begin + rows.pos[r]) * a.out_tok + head * a.out_head + 2 * rows.t4;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint32_t*>(dst + 8 * j) =
          pack_bf16x2(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
  }
}

}  // namespace nanovllm::kernels::cuda::hopper_prefill
