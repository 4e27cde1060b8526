// The fused decode MLP with its gate and up rows streamed (kernels/fused_mlp.h's
// FusedMlpPlan::stream_gate_up; launched by fused_mlp.cu): one token, H = 256 kXChunks.
//
// A block's share of gate_up does not fit its shared memory here (the 8B's tp-4 shard: 48 rows
// of 8 KB), but its down rows do (32 rows of 6 KB). So thread 0 requests each warp's down rows
// with bulk copies before griddepcontrol.wait, as the held kernel does, and each warp
// loads the gate and up rows of its act columns into registers, a column at a time with the next
// column's gate row in flight beside it, its first column before the wait (the weights are
// constants). A lane holds kXChunks 16-byte chunks of each row (192 registers for the three; 220
// a thread in all, no spills); with 8 warps a block has 128-192 KB of gate and up rows in flight
// besides its down rows.
// After the wait: x into shared memory, the warp's dot products (lanes over H, a warp sum), act
// rounded as the held kernel rounds it, the grid barrier, the whole act into shared memory and
// the warp's down rows from shared memory. The down weights stream beside gate_up's instead of
// after them, where the two-GEMM path's down blocks wait for gate_up's to leave the SMs.
// A ring of bulk copies filled by a producer warp instead of registers (which also took tp 2)
// was correct but slower in the step: a 226 KB block leaves its SM nothing to overlap with the
// projections around it (bench/results/h200x4-2026-11-28-issue31_fused_mlp_ring_per_warp.txt).
#pragma once

#include "kernels/cuda/fused_mlp_kernel.cuh"

namespace nanovllm::kernels::cuda::fused {

// Shared memory (bf16 unless said): down [R][I], x [H], act [I], then the down mbarriers (u64)
// [8]. The norm and the output projection stay with the caller (Params' residual, attn unused).
template <int kXChunks>
__global__ void __launch_bounds__(kThreads, 1) fused_mlp_stream_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  NANOVLLM_TRACE_SCOPE(trace::kFusedMlp, p.w_down);
  constexpr int kHidden = 256 * kXChunks;
  const int A = p.act_per_block, R = p.rows_per_block, I = p.inter;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* s_down = reinterpret_cast<bf16*>(smem_raw);
  bf16* s_x = s_down + static_cast<int64_t>(R) * I;
  bf16* s_act = s_x + kHidden;
  uint64_t* bar_down = reinterpret_cast<uint64_t*>(s_act + I);

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int b = static_cast<int>(blockIdx.x);
  const int act0 = b * A, row0 = b * R;
  const int block_cols = max(0, min(I - act0, A)), block_rows = max(0, min(kHidden - row0, R));
  const Share cols = warp_share(block_cols, warp), rows = warp_share(block_rows, warp);

  // Column j of the warp's share: its gate row and its up row, a lane's chunks lane + 32 i.
  uint4 wg[kXChunks], wu[kXChunks], wg_next[kXChunks];
  auto load_row = [&](uint4(&dst)[kXChunks], int64_t row) {
    const bf16* w = p.w_gate_up + row * kHidden;
#pragma unroll
    for (int i = 0; i < kXChunks; ++i) dst[i] = load_weights16<true>(w + (lane + 32 * i) * 8);
  };
  const int64_t col0 = act0 + cols.first;
  if (cols.count > 0) {
    load_row(wg, col0);
    load_row(wu, I + col0);
  }
  if (threadIdx.x == 0) {
    for (int w = 0; w < kWarps; ++w) mbarrier_init(&bar_down[w], 1);
    mbarrier_init_fence();
    request_down_rows(p, s_down, bar_down, row0, block_rows);
  }
  allow_next_grid();  // every block is resident once the next kernel may launch
  wait_for_previous_grid();

  stage_rows<1>(s_x, p.x, p.ldx, kHidden, p.m);  // also orders the mbarriers' initialisation
  for (int j = 0; j < cols.count; ++j) {
    // The next column's gate row is in flight while this one is summed (both rows would need
    // 256 registers a lane); its up row is requested once this one's up registers are free.
    if (j + 1 < cols.count) load_row(wg_next, col0 + j + 1);
    float g = 0.f, u = 0.f;
#pragma unroll
    for (int i = 0; i < kXChunks; ++i) {
      const Bf16x8 xv = load8(s_x + (lane + 32 * i) * 8);
      g = dot8(*reinterpret_cast<const Bf16x8*>(&wg[i]), xv, g);
      u = dot8(*reinterpret_cast<const Bf16x8*>(&wu[i]), xv, u);
    }
    if (j + 1 < cols.count) {
      load_row(wu, I + col0 + j + 1);  // first: the copy below waits for the gate row to land
#pragma unroll
      for (int i = 0; i < kXChunks; ++i) wg[i] = wg_next[i];
    }
    g = warp_sum(g);
    u = warp_sum(u);
    if (lane == 0)
      p.act[col0 + j] = to_bf16(silu_mul_exact(to_f32(to_bf16(g)), to_f32(to_bf16(u))));
  }

  grid_barrier(p.barrier, p.blocks);
  stage_rows<1>(s_act, p.act, p.ld_act, I, p.m);  // the whole act, which every block wrote
  const int act_row_chunks = I / 8;
  if (rows.count > 0) mbarrier_wait(&bar_down[warp], 0);
  for (int j = 0; j < rows.count; ++j) {
    const bf16* w = s_down + static_cast<int64_t>(rows.first + j) * I;
    float s = 0.f;
    for (int c = lane; c < act_row_chunks; c += 32)
      s = dot8(load8(w + c * 8), load8(s_act + c * 8), s);
    s = warp_sum(s);
    if (lane == 0) p.y[row0 + rows.first + j] = to_bf16(s);
  }
#else
  __trap();  // built without sm_90: the host never launches it (fused_mlp_supports)
#endif
}

}  // namespace nanovllm::kernels::cuda::fused
