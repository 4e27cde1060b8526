// The decode-size GEMM kernel behind kernels/skinny_gemm.h: y[M, N] = x[M, K] @ w[N, K]^T.
//
// Tensor cores with the roles swapped: weight rows are the MMA's M (16 per tile) and tokens its
// N (8 per n-tile), so a 16-row weight tile feeds up to 8 n-tiles of tokens and M = 1 wastes
// only tensor-core issue slots, which are plentiful here; the weight stream is what counts.
//
// Weights go straight from global memory into MMA fragments, 16 bytes per load, no shared
// memory: a dot product may visit k in any order as long as w and x use the same one, so lane
// (g, t) (lane = 4g + t) loads 16 contiguous k of its rows g and g + 8 and the same 16 k of
// token g, and each half (4 values) of a 16-byte load becomes one MMA's k-pairs (2t, 2t+1) and
// (2t+8, 2t+9). A 64-k chunk is then one 128-byte line per weight row, read by the 4 lanes
// of a quad.
//
// kActOut (the MLP's gate_up projection with its activation in the epilogue): w is [2I, K] =
// [gate; up] and y [M, I] = silu(gate) * up. Row g of a 16-row tile is gate row 8r + g of the
// block's act rows and row g + 8 the up row of the same act row, so a block of 16R weight rows
// writes 8R act rows, each from the two rounded-to-bf16 sums, exactly as the gate_up GEMM
// followed by silu_and_mul would.
//
// Work split: block b = (tile, rank) owns weight rows [16R * tile, +16R) and the rank-th
// contiguous range of K chunks; its warps take the range's chunks round-robin (so a block's
// warps read neighbouring lines together). Warps are summed through shared memory in warp
// order, then the blocks of a cluster through distributed shared memory in rank order: the
// same sum order every run.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/silu_mul.cuh"

namespace nanovllm::kernels::cuda::skinny {

namespace cg = cooperative_groups;

constexpr int kChunkK = 64;       // k per warp step: 4 lanes x 16 k = one 128-byte line a row
constexpr int kMaxThreads = 256;  // 8 warps

struct Params {
  const bf16* x;  // [M, K] (row stride ldx), or [M, 2K] = [gate | up] when fused
  int64_t ldx;
  const bf16* w;  // [N, K] (row stride ldw)
  int64_t ldw;
  const bf16* bias;  // [N] or null
  void* y;           // [M, N] bf16 or f32 (row stride ldy); kActOut: [M, I] bf16
  int64_t ldy;
  int m, n, k;          // kActOut: n = I, the act rows (w has 2n rows)
  int cluster;          // blocks per cluster (K ranges)
  int chunks_per_rank;  // K chunks of one cluster rank's range (the last may hold fewer)
  int next_after_wait;  // SkinnyGemmConfig::next_after_wait
};

// Shared memory of a block: [warps][kNt * 8 tokens][16R rows + 4] f32 partial sums. The row
// padding puts the 4 lanes t of a quad (tokens 2t) 8 banks apart: conflict-free stores.
constexpr size_t smem_bytes(int row_tiles, int n_tiles, int warps) {
  return static_cast<size_t>(warps) * n_tiles * 8 * (16 * row_tiles + 4) * sizeof(float);
}

// silu(gate) * up in f32, rounded to bf16 like kernels/cuda/activation.cu, but with the fast
// exp and divide: every block recomputes its slice of the activation, so this sits on the
// path of every weight chunk; the result differs from the exact form by a few f32 ulp.
__device__ __forceinline__ float silu_mul(float g, float u) {
  return __fdividef(g, 1.f + __expf(-g)) * u;
}
__device__ __forceinline__ uint32_t silu_mul2(uint32_t gate, uint32_t up) {
  const float2 g = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&gate));
  const float2 u = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&up));
  return pack_bf16x2(silu_mul(g.x, u.x), silu_mul(g.y, u.y));
}

// 8 input values of one token at p (fused: silu(gate) * up, up k_up elements further on).
template <bool kSiluMul>
__device__ __forceinline__ uint4 load_x(const bf16* p, int k_up) {
  const uint4 a = load16_l2(p);  // x: the previous kernel's output
  if constexpr (!kSiluMul) {
    return a;
  } else {
    const uint4 b = load16_l2(p + k_up);
    return make_uint4(silu_mul2(a.x, b.x), silu_mul2(a.y, b.y), silu_mul2(a.z, b.z),
                      silu_mul2(a.w, b.w));
  }
}

__device__ __forceinline__ void store_out(float* y, float v) {
  *y = v;
}
__device__ __forceinline__ void store_out(bf16* y, float v) {
  *y = to_bf16(v);
}

// Blocks of kMaxThreads an SM should hold: 4 (<= 64 registers a thread, which these fit
// without spilling) for one n-tile of tokens, whose latency-bound loads want every warp.
template <int kRowTiles, int kNt, bool kSiluMul>
constexpr int kMinBlocks = kNt == 1 && kRowTiles <= 2 && !kSiluMul ? 4 : 1;

// kRowTiles: 16-row weight tiles per block (R); kNt: 8-token n-tiles (M <= 8 kNt).
template <int kRowTiles, int kNt, typename OutT, bool kSiluMul, bool kActOut = false>
__global__ void __launch_bounds__(kMaxThreads, (kMinBlocks<kRowTiles, kNt, kSiluMul>))
    skinny_gemm_kernel(const Params p) {
  static_assert(!(kSiluMul && kActOut), "one fused activation at a time");
  NANOVLLM_TRACE_SCOPE(trace::kSkinnyGemm, p.w);
  constexpr int kRows = 16 * kRowTiles, kCols = 8 * kNt, kPitch = kRows + 4;
  constexpr int kOutRows = kActOut ? kRows / 2 : kRows;  // y rows a block writes
  // Chunks per loop step: 2 for one row tile, so every lane has >= 8 16-byte weight loads in
  // flight before its MMAs.
  constexpr int kUnroll = kRowTiles == 1 ? 2 : 1;
  extern __shared__ float partial[];  // [warps][kCols][kPitch], see smem_bytes

  const int warps = static_cast<int>(blockDim.x) / 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int tile = static_cast<int>(blockIdx.x) / p.cluster;
  const int rank = static_cast<int>(blockIdx.x) % p.cluster;  // == cluster block rank
  const int n0 = tile * kOutRows;
  const int total_chunks = (p.k + kChunkK - 1) / kChunkK;
  const int chunk_begin = rank * p.chunks_per_rank;
  const int chunk_end = min(chunk_begin + p.chunks_per_rank, total_chunks);

  // This lane's weight rows (h = 0: row g, h = 1: row g + 8 of each tile) and tokens, at its
  // 16-k offset in a chunk. Rows and tokens past the end read nothing (zeros).
  const bf16* w_row[kRowTiles][2];
  bool w_ok[kRowTiles][2];
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // kActOut: act row n0 + 8r + g, its gate row (h = 0) or up row (h = 1, n rows on).
      const int out_row = kActOut ? n0 + 8 * r + g : n0 + 16 * r + 8 * h + g;
      const int row = kActOut && h == 1 ? out_row + p.n : out_row;
      w_ok[r][h] = out_row < p.n;
      w_row[r][h] = p.w + (w_ok[r][h] ? row : 0) * p.ldw + 16 * t;
    }
  const bf16* x_row[kNt];
  bool x_ok[kNt];
#pragma unroll
  for (int j = 0; j < kNt; ++j) {
    const int token = 8 * j + g;
    x_ok[j] = token < p.m;
    x_row[j] = p.x + (x_ok[j] ? token : 0) * p.ldx + 16 * t;
  }

  float acc[kRowTiles][kNt][4] = {};
  const uint4 zero = make_uint4(0, 0, 0, 0);
  // kUnroll chunks c, c + warps, ...: weights into wv, predicated off past the range.
  uint4 wv[kUnroll][kRowTiles][2][2];  // [chunk][tile][row g / g + 8][k 0-7 / 8-15]
  const auto load_w = [&](int c) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = c + u * warps;
      const int kk = chunk * kChunkK + 16 * t;
#pragma unroll
      for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int v = 0; v < 2; ++v) {
            const bool ok = chunk < chunk_end && w_ok[r][h] && kk + 8 * v < p.k;
            wv[u][r][h][v] = ok ? load_weights16(w_row[r][h] + chunk * kChunkK + 8 * v) : zero;
          }
    }
  };
  const auto mma_chunks = [&](int c) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = c + u * warps;
      const int kk = chunk * kChunkK + 16 * t;
      uint4 xv[kNt][2];  // [n-tile][k 0-7 / 8-15] of token 8j + g
#pragma unroll
      for (int j = 0; j < kNt; ++j)
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          const bool ok = chunk < chunk_end && x_ok[j] && kk + 8 * v < p.k;
          xv[j][v] = ok ? load_x<kSiluMul>(x_row[j] + chunk * kChunkK + 8 * v, p.k) : zero;
        }
        // Consecutive MMAs update different accumulators, so none waits on the one before.
#pragma unroll
      for (int v = 0; v < 2; ++v)
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int j = 0; j < kNt; ++j)
#pragma unroll
            for (int r = 0; r < kRowTiles; ++r) {
              const uint4& lo = wv[u][r][0][v];
              const uint4& hi = wv[u][r][1][v];
              const uint32_t a[4] = {half ? lo.z : lo.x, half ? hi.z : hi.x, half ? lo.w : lo.y,
                                     half ? hi.w : hi.y};
              mma_bf16_16816(acc[r][j], a, half ? xv[j][v].z : xv[j][v].x,
                             half ? xv[j][v].w : xv[j][v].y);
            }
    }
  };

  // Programmatic dependent launch (a no-op without it): the weights are constant, so they
  // may stream in while the previous kernel finishes; x, and y's writes, wait for it. The next
  // kernel may launch from here, or once the wait has returned (p.next_after_wait).
  if (!p.next_after_wait) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  bool waited = false;
  for (int c = chunk_begin + warp; c < chunk_end; c += warps * kUnroll) {
    load_w(c);
    if (!waited) {
      asm volatile("griddepcontrol.wait;\n" ::: "memory");
      NANOVLLM_TRACE_WAITED();
      waited = true;
    }
    mma_chunks(c);
  }
  if (!waited) {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    NANOVLLM_TRACE_WAITED();
  }
  if (p.next_after_wait) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // Accumulator (r, j): c0, c1 = (row 16r + g, tokens 8j + 2t, +1), c2, c3 = row + 8.
  float* mine = partial + warp * kCols * kPitch;
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
    for (int j = 0; j < kNt; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        mine[(8 * j + 2 * t + (i & 1)) * kPitch + 16 * r + g + 8 * (i >> 1)] = acc[r][j][i];
  __syncthreads();

  // Output element e = (token e / kOutRows, row e % kOutRows): consecutive threads, consecutive
  // rows of y. sum(token, row) is the full dot product of a weight row of the block (its row in
  // `partial`); kActOut's act row i takes gate row 16 (i / 8) + i % 8 and up row that + 8.
  const int elems = kOutRows * p.m;
  const auto write = [&](int e, const auto& sum) {
    const int i = e % kOutRows, token = e / kOutRows, row = n0 + i;
    if (row >= p.n) return;
    if constexpr (kActOut) {
      const int gate = 16 * (i / 8) + i % 8;
      const float g = to_f32(to_bf16(sum(token, gate))), u = to_f32(to_bf16(sum(token, gate + 8)));
      store_out(static_cast<OutT*>(p.y) + token * p.ldy + row, silu_mul_exact(g, u));
    } else {
      float s = sum(token, i);
      if (p.bias != nullptr) s += to_f32(p.bias[row]);
      store_out(static_cast<OutT*>(p.y) + token * p.ldy + row, s);
    }
  };
  const auto sum_warps = [&](int token, int row) {
    float s = 0.f;
    for (int w = 0; w < warps; ++w) s += partial[w * kCols * kPitch + token * kPitch + row];
    return s;
  };
  if (p.cluster == 1) {
    for (int e = static_cast<int>(threadIdx.x); e < elems; e += static_cast<int>(blockDim.x))
      write(e, sum_warps);
    return;
  }
  // The block's sum of every weight row goes to warp 0's slot (each element read and written by
  // one thread only); rank q then adds up its share of the output elements over all ranks.
  for (int e = static_cast<int>(threadIdx.x); e < kRows * p.m; e += static_cast<int>(blockDim.x))
    partial[(e / kRows) * kPitch + e % kRows] = sum_warps(e / kRows, e % kRows);
  const cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every rank's block sum is visible
  const auto sum_ranks = [&](int token, int row) {
    float s = 0.f;
    for (int q = 0; q < p.cluster; ++q)
      s += cluster.map_shared_rank(partial, q)[token * kPitch + row];
    return s;
  };
  const int share = (elems + p.cluster - 1) / p.cluster;
  const int e_end = min(elems, (rank + 1) * share);
  for (int e = rank * share + static_cast<int>(threadIdx.x); e < e_end;
       e += static_cast<int>(blockDim.x))
    write(e, sum_ranks);
  cluster.sync();  // no block leaves while another still reads its shared memory
}

}  // namespace nanovllm::kernels::cuda::skinny
