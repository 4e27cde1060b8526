// The fused decode MLP's kernel (kernels/fused_mlp.h; launched by fused_mlp.cu): gate_up, the
// activation and down in one kernel of one block an SM, the two halves joined by a grid barrier.
//
// Block b owns act columns [b A, b A + A) (gate rows b A.. and up rows I + b A.. of w_gate_up)
// and down_proj output rows [b R, b R + R); each of its 8 warps takes a contiguous share of
// both, and lane 0 of the warp requests that share's rows with bulk copies into shared memory
// (one mbarrier for its gate and up rows, one for its down rows) before griddepcontrol.wait.
// After the wait: x into shared memory, each lane's x chunks into registers, the warp's gate
// and up dot products (lanes over H, a warp sum), act = silu(bf16 gate) * bf16 up rounded to
// bf16 into the act scratch; the grid barrier; the whole act into shared memory; the warp's
// down rows (lanes over I), y rounded to bf16.
//
// With the output projection in front (kOChunks > 0, one GPU): each warp also loads its block's
// o_proj row (the hidden row of its down row) into registers before the wait (the block's shared
// memory already holds its gate, up and down rows); after the wait it sums that row against attn
// (read through L2), writes the bf16 result over x, and the grid meets at a first barrier before
// the norm reads the whole of x.
#pragma once

#include <cstdint>
#include <cstdio>

#include "kernels/cuda/add_rms_norm_row.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/hopper.cuh"
#include "kernels/cuda/silu_mul.cuh"

namespace nanovllm::kernels::cuda::fused {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
// A grid barrier wait this long means a block never arrived (the plan keeps every block
// resident, so only a fault elsewhere gets here): trap, naming the kernel, rather than hang.
constexpr uint64_t kBarrierTimeoutNs = 2'000'000'000ull;
// Shared memory the plan leaves for the kernel's static arrays (block_sum's 128 bytes).
constexpr int kStaticSmem = 1024;

struct Params {
  bf16* x;  // [M, H], row stride ldx (written first where the kernel takes o_proj)
  int64_t ldx;
  const bf16* w_gate_up;  // [2I, H] = [gate; up], contiguous
  const bf16* w_down;     // [H, I], contiguous
  bf16* act;              // [M, I], row stride ld_act
  int64_t ld_act;
  bf16* y;  // [M, H], row stride ldy
  int64_t ldy;
  unsigned long long* barrier;  // monotonic arrivals of every call of this call site
  // kNorm: x is the attention block's output, and the kernel first takes the post-attention
  // norm: residual = bf16(x + residual) (written back by block 0), x = rms_norm(residual) * w.
  bf16* residual;  // [M, H], row stride ld_res
  int64_t ld_res;
  const bf16* norm_weight;  // [H]
  float eps;
  // kOChunks > 0: x = attn @ w_out^T first.
  const bf16* attn;  // [M, Kq], row stride ld_attn
  int64_t ld_attn;
  const bf16* w_out;  // [H, Kq], contiguous, Kq = 256 kOChunks
  int m, hidden, inter;
  int act_per_block, rows_per_block, blocks;
};

// One bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global
// memory into this block's shared memory, completing on `bar`.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}

__device__ __forceinline__ unsigned long long load_acquire_gpu(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long add_release_gpu(unsigned long long* p) {
  unsigned long long old;
  asm volatile("atom.add.release.gpu.global.u64 %0, [%1], 1;" : "=l"(old) : "l"(p) : "memory");
  return old;
}

// Every block of the grid arrives before any goes on; what a block wrote before it is visible
// to every block after it: thread 0 arrives with a release and spins with acquires, the CTA
// barriers around it order the block's other threads (cooperative groups' grid sync on sm_70+;
// fences around a relaxed add cost 0.27 us more a barrier, kernel_boundary_bench).
__device__ __forceinline__ void grid_barrier(unsigned long long* counter, int blocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long old = add_release_gpu(counter);
    const unsigned long long target = (old / blocks + 1) * blocks;
    const uint64_t start = global_ns();
    // The clock only every 256 polls: each read of it is a trip of its own.
    for (unsigned polls = 1; load_acquire_gpu(counter) < target; ++polls) {
      if (polls % 256 == 0 && global_ns() - start > kBarrierTimeoutNs) {
        printf("fused_mlp: block %d waited over 2 s at the grid barrier (%llu of %llu arrived)\n",
               static_cast<int>(blockIdx.x), load_acquire_gpu(counter) % blocks,
               static_cast<unsigned long long>(blocks));
        __trap();
      }
    }
  }
  __syncthreads();
}

// 8 bf16 another kernel or block wrote (common.cuh's load16_l2).
__device__ __forceinline__ Bf16x8 load8_l2(const bf16* p) {
  const uint4 v = load16_l2(p);
  return *reinterpret_cast<const Bf16x8*>(&v);
}

// sum += w . v over 8 bf16 pairs, in f32.
__device__ __forceinline__ float dot8(const Bf16x8& w, const Bf16x8& v, float sum) {
#pragma unroll
  for (int i = 0; i < 8; ++i) sum = fmaf(to_f32(w.v[i]), to_f32(v.v[i]), sum);
  return sum;
}

// [rows, cols) rows of a warp's contiguous share `per` of a block's `count`.
struct Share {
  int first, count;
};
__device__ __forceinline__ Share warp_share(int block_count, int warp) {
  const int per = (block_count + kWarps - 1) / kWarps;
  const int first = warp * per;
  return {first, max(0, min(block_count - first, per))};
}

// Token rows [0, kTok) of a [M, cols] bf16 matrix (row stride ld) into shared memory
// [kTok][cols] through L2 (cp.async .cg: other kernels or blocks wrote them), rows past M zero;
// complete and visible to the block on return. cols is a multiple of 8.
template <int kTok>
__device__ __forceinline__ void stage_rows(bf16* dst, const bf16* src, int64_t ld, int cols,
                                           int m) {
  const int row_chunks = cols / 8;
  for (int i = static_cast<int>(threadIdx.x); i < kTok * row_chunks; i += kThreads) {
    const int t = i / row_chunks, c = i % row_chunks;
    cp_async16(dst + t * cols + c * 8, t < m ? src + t * ld + c * 8 : src, t < m ? 16 : 0);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// Thread 0: each warp's share of the block's down rows [row0, row0 + block_rows) of w_down
// ([H, I]) into s_down ([R][I]) with bulk copies, each completing on that warp's bar_down
// (initialised, one arrival).
__device__ __forceinline__ void request_down_rows(const Params& p, bf16* s_down, uint64_t* bar_down,
                                                  int row0, int block_rows) {
  const int I = p.inter;
  for (int w = 0; w < kWarps; ++w) {
    const Share r = warp_share(block_rows, w);
    if (r.count == 0) continue;
    const uint32_t bytes = static_cast<uint32_t>(r.count) * I * 2;
    mbarrier_arrive_expect_tx(&bar_down[w], bytes);
    bulk_copy(s_down + static_cast<int64_t>(r.first) * I,
              p.w_down + static_cast<int64_t>(row0 + r.first) * I, bytes, &bar_down[w]);
  }
}

// Shared memory (bf16 unless said): gate [A][H], up [A][H], down [R][I], x [kTok][H],
// residual [kTok][H] (kNorm), act [kTok][I], then the mbarriers (u64): gate_up [8], down [8].
// kOChunks: 0, or the output projection in front (kNorm only; R <= 8, Kq = 256 kOChunks).
template <int kTok, int kXChunks, bool kNorm, int kOChunks>
__global__ void __launch_bounds__(kThreads, 1) fused_mlp_kernel(const Params p) {
  static_assert(kOChunks == 0 || kNorm, "the output projection comes with the norm");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // In the timeline: start to wait is the weights' requests, wait to end everything else.
  NANOVLLM_TRACE_SCOPE(trace::kFusedMlp, p.w_down);
  constexpr int kHidden = 256 * kXChunks;  // a lane's kXChunks 16-byte chunks of x
  const int A = p.act_per_block, R = p.rows_per_block, I = p.inter;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* s_gate = reinterpret_cast<bf16*>(smem_raw);
  bf16* s_up = s_gate + A * kHidden;
  bf16* s_down = s_up + A * kHidden;
  bf16* s_x = s_down + static_cast<int64_t>(R) * I;
  bf16* s_res = s_x + kTok * kHidden;
  bf16* s_act = s_res + kTok * kHidden;
  uint64_t* bar_gate_up = reinterpret_cast<uint64_t*>(s_act + kTok * I);
  uint64_t* bar_down = bar_gate_up + kWarps;

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int b = static_cast<int>(blockIdx.x);
  const int act0 = b * A, row0 = b * R;
  const int block_cols = max(0, min(I - act0, A)), block_rows = max(0, min(kHidden - row0, R));
  const Share cols = warp_share(block_cols, warp), rows = warp_share(block_rows, warp);
  // The output projection's row of this warp first: the first weights the kernel needs.
  uint4 w_out[kOChunks > 0 ? kOChunks : 1];
  const bool out_row = kOChunks > 0 && warp < block_rows;  // one row a warp (R <= 8)
  if constexpr (kOChunks > 0) {
    if (out_row) {
      const bf16* w = p.w_out + static_cast<int64_t>(row0 + warp) * (256 * kOChunks);
#pragma unroll
      for (int i = 0; i < kOChunks; ++i) w_out[i] = load_weights16<true>(w + (lane + 32 * i) * 8);
    }
  }
  if (threadIdx.x == 0) {
    for (int w = 0; w < kWarps; ++w) {
      mbarrier_init(&bar_gate_up[w], 1);
      mbarrier_init(&bar_down[w], 1);
    }
    mbarrier_init_fence();
  }
  // The weights are constants: request them before the wait, every warp's gate and up rows
  // first, then the down rows, so that the gate_up half can start before the down rows land.
  if (threadIdx.x == 0) {
    for (int w = 0; w < kWarps; ++w) {
      const Share c = warp_share(block_cols, w);
      if (c.count == 0) continue;
      const uint32_t bytes = static_cast<uint32_t>(c.count) * kHidden * 2;
      mbarrier_arrive_expect_tx(&bar_gate_up[w], 2 * bytes);
      const int64_t gate_row = act0 + c.first;
      bulk_copy(s_gate + c.first * kHidden, p.w_gate_up + gate_row * kHidden, bytes,
                &bar_gate_up[w]);
      bulk_copy(s_up + c.first * kHidden, p.w_gate_up + (I + gate_row) * kHidden, bytes,
                &bar_gate_up[w]);
    }
    request_down_rows(p, s_down, bar_down, row0, block_rows);
  }
  allow_next_grid();  // every block is resident once the next kernel may launch
  wait_for_previous_grid();

  __syncthreads();  // the barriers are initialised

  if constexpr (kOChunks > 0) {
    // x's hidden rows of this block: attn . the warp's row, rounded to bf16 once.
    if (out_row) {
      for (int t = 0; t < p.m && t < kTok; ++t) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < kOChunks; ++i)
          s = dot8(*reinterpret_cast<const Bf16x8*>(&w_out[i]),
                   load8_l2(p.attn + t * p.ld_attn + (lane + 32 * i) * 8), s);
        s = warp_sum(s);
        if (lane == 0) p.x[t * p.ldx + row0 + warp] = to_bf16(s);
      }
    }
    grid_barrier(p.barrier, p.blocks);  // every row of x is written
  }

  // x: [kTok][H] into shared memory (token rows past M zero), then a lane's chunks
  // lane + 32 i of each token into registers as f32 (converted once, used by every row).
  if constexpr (kNorm) {
    // The post-attention norm, every block for itself: rms_norm.cu's fused form at its block
    // size and in its order (add_residual_unit, block_sum, write_normed_row), so the residual
    // and x carry its exact bits.
    for (int t = 0; t < kTok; ++t) {
      bf16* res = s_res + t * kHidden;
      if (t >= p.m) {
        for (int i = static_cast<int>(threadIdx.x) * 8; i < kHidden; i += kThreads * 8)
          store8(s_x + t * kHidden + i, Bf16x8{});
        continue;
      }
      float sq = 0.f;
      for (int i = static_cast<int>(threadIdx.x) * 8; i < kHidden; i += kThreads * 8) {
        store8(res + i, load8(p.residual + t * p.ld_res + i));
        const bf16* xi = p.x + t * p.ldx + i;
        add_residual_unit(res + i, kOChunks > 0 ? load8_l2(xi) : load8(xi), sq);
      }
      const float inv = rsqrtf(block_sum(sq) / static_cast<float>(kHidden) + p.eps);
      write_normed_row<kThreads>(s_x + t * kHidden, res, p.norm_weight, kHidden, inv);
    }
    __syncthreads();
  } else {
    stage_rows<kTok>(s_x, p.x, p.ldx, kHidden, p.m);
  }
  float xr[kTok][kXChunks][8];
#pragma unroll
  for (int t = 0; t < kTok; ++t)
#pragma unroll
    for (int i = 0; i < kXChunks; ++i) {
      const Bf16x8 v = load8(s_x + t * kHidden + (lane + 32 * i) * 8);
#pragma unroll
      for (int e = 0; e < 8; ++e) xr[t][i][e] = to_f32(v.v[e]);
    }

  if (cols.count > 0) mbarrier_wait(&bar_gate_up[warp], 0);
  for (int j = 0; j < cols.count; ++j) {
    const bf16* gate = s_gate + (cols.first + j) * kHidden;
    const bf16* up = s_up + (cols.first + j) * kHidden;
    float g[kTok] = {}, u[kTok] = {};
#pragma unroll
    for (int i = 0; i < kXChunks; ++i) {
      const Bf16x8 wg = load8(gate + (lane + 32 * i) * 8), wu = load8(up + (lane + 32 * i) * 8);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float fg = to_f32(wg.v[e]), fu = to_f32(wu.v[e]);
#pragma unroll
        for (int t = 0; t < kTok; ++t) {
          g[t] = fmaf(fg, xr[t][i][e], g[t]);
          u[t] = fmaf(fu, xr[t][i][e], u[t]);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      g[t] = warp_sum(g[t]);
      u[t] = warp_sum(u[t]);
      if (lane == t && t < p.m)
        p.act[t * p.ld_act + act0 + cols.first + j] =
            to_bf16(silu_mul_exact(to_f32(to_bf16(g[t])), to_f32(to_bf16(u[t]))));
    }
  }

  grid_barrier(p.barrier, p.blocks);
  // Every block has read the residual: block 0 writes the sum back (the next layer's norm adds
  // the MLP's output to it).
  if (kNorm && b == 0) {
    for (int i = static_cast<int>(threadIdx.x) * 8; i < p.m * kHidden; i += kThreads * 8) {
      const int t = i / kHidden, c = i % kHidden;
      store8(p.residual + t * p.ld_res + c, load8(s_res + t * kHidden + c));
    }
  }

  stage_rows<kTok>(s_act, p.act, p.ld_act, I, p.m);  // the whole act, which every block wrote
  const int act_row_chunks = I / 8;

  if (rows.count > 0) mbarrier_wait(&bar_down[warp], 0);
  for (int j = 0; j < rows.count; ++j) {
    const bf16* w = s_down + static_cast<int64_t>(rows.first + j) * I;
    float s[kTok] = {};
    for (int c = lane; c < act_row_chunks; c += 32) {
      const Bf16x8 wv = load8(w + c * 8);
#pragma unroll
      for (int t = 0; t < kTok; ++t) s[t] = dot8(wv, load8(s_act + t * I + c * 8), s[t]);
    }
#pragma unroll
    for (int t = 0; t < kTok; ++t) {
      s[t] = warp_sum(s[t]);
      if (lane == t && t < p.m) p.y[t * p.ldy + row0 + rows.first + j] = to_bf16(s[t]);
    }
  }
#else
  __trap();  // built without sm_90: the host never launches it (fused_mlp_supports)
#endif
}

}  // namespace nanovllm::kernels::cuda::fused
