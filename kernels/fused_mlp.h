// The MLP of a decode step at a few tokens in one kernel (kernels/cuda/fused_mlp_kernel.cuh,
// launched by fused_mlp.cu): y = (silu(x @ gate^T) * (x @ up^T)) @ down^T, for weights small enough
// that every block's share of both projections fits its shared memory (the 0.6B shape, and the
// 1.7B's shard at --tp 4), or its share of down alone, gate and up streamed through registers
// (the 8B's shard at --tp 4 and 8: kernels/cuda/fused_mlp_stream_kernel.cuh). Why: at batch 1 the
// gate_up and down GEMMs cost 5.3 and 4.3 us a layer inside the step for 4.5 us of weights at
// bandwidth (bench/README.md, the knock-out table), and down's blocks cannot start streaming until
// gate_up's leave the SMs. Here one block an SM requests its share of gate_up's rows and of down's
// rows at its start (before griddepcontrol.wait, as the weights are constants), computes its act
// columns, meets every other block at a grid barrier, and computes its down rows from the whole
// act: one launch, no second weight ramp. On one GPU the post-attention norm, and before it the
// attention's output projection, can run in the same kernel (FusedMlpNorm): o_proj costs 2.2 us a
// layer as its own GEMM node, here a grid barrier (1.1 us) and a few dot products whose weights
// were requested at the block's start.
//
// The grid barrier needs every block resident at once: the plan takes one block per SM at
// most, and a kernel that follows on the stream can launch (programmatic dependent launch)
// only once every block of this one has started. The barrier is a monotonic 64-bit counter
// owned by the caller (zeroed once, never reset: call c waits for it to reach c x blocks), so
// the kernel can be captured in a CUDA graph and replayed; a wait past a generous bound traps
// with a message, so a stuck barrier is an error rather than a hang. (A process limited to part
// of the GPU's SMs, as an MPS client with an active-thread percentage, may not hold the grid at
// once: there the run stops at that trap, and NANOVLLM_FUSED_MLP=off is the way around it.)
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

constexpr int64_t kFusedMlpMaxM = 2;  // tokens (a lane holds x in f32 registers)
// The hidden size whose gate and up rows a warp streams (FusedMlpPlan::stream_gate_up): a lane
// holds 16 of each row's 16-byte chunks in registers.
constexpr int64_t kFusedMlpStreamHidden = 4096;

// How the kernel cuts an MLP of hidden size H and intermediate size I over the SMs.
struct FusedMlpPlan {
  int blocks = 0;          // <= the SMs: one block each, all resident at once
  int act_per_block = 0;   // act columns of a block (its gate rows and as many up rows)
  int rows_per_block = 0;  // down_proj output rows of a block
  int64_t smem_bytes = 0;  // dynamic shared memory of a block
  // Only the down rows in shared memory; each warp streams its gate and up rows through its
  // registers, a column at a time (kernels/cuda/fused_mlp_stream_kernel.cuh). Where a block's
  // share of both does not fit but its down rows do: the 8B's shard at --tp 4 and 8 (H 4096;
  // at tp 4 gate_up and down cost 16.8 and 11.1 us a layer at batch 1 for 11.9 and 5.9 us of
  // weights, down's stream waiting for gate_up's blocks to leave).
  bool stream_gate_up = false;
};

// The plan for M tokens on `sms` SMs of `smem_limit` bytes of shared memory a block, or none
// where the kernel does not take the shape: I not a multiple of 8; H 1024 or 2048 (a lane holds
// H / 256 16-byte chunks of x) with M <= kFusedMlpMaxM and both shares within smem_limit; or
// H 4096 with one token and the down rows within smem_limit (stream_gate_up).
std::optional<FusedMlpPlan> fused_mlp_plan(int64_t m, int64_t hidden, int64_t inter, int sms,
                                           int64_t smem_limit);

// The post-attention norm taken in front of the MLP (fused_mlp's post_norm): residual =
// bf16(x + residual), then x = rms_norm(residual) * weight, rms_norm.cu's fused form bit for bit.
// residual: [M, H] bf16, read and written; weight: [H] bf16.
// With attn and out_proj set (one GPU: the projection needs no sum over ranks), the attention
// block's output projection comes first in the same kernel: x = bf16(attn @ out_proj^T), written
// over x, each block its down rows' hidden rows from out_proj rows held in registers since its
// start, then a second grid barrier before the norm (fused_mlp_takes_out_proj says where).
// attn: [M, Kq] bf16; out_proj: [H, Kq] bf16, contiguous, no bias.
struct FusedMlpNorm {
  TensorView residual;
  TensorView weight;
  float eps = 0.f;
  TensorView attn;
  TensorView out_proj;
};

// Whether a plan takes the output projection in front (FusedMlpNorm::attn): a warp holds at
// most one of its rows (rows_per_block <= 8), a lane that row's Kq / 256 16-byte chunks in
// registers (Kq 1024 or 2048: the 0.6B's 16 heads of 128).
bool fused_mlp_takes_out_proj(const FusedMlpPlan& plan, int64_t q_width);

namespace cuda {

// Whether fused_mlp runs M tokens of this shape here (an sm_90 build and device, and a plan for
// this device's SMs and shared memory).
bool fused_mlp_supports(int64_t m, int64_t hidden, int64_t inter);

// y = silu_and_mul(x @ w_gate_up^T) @ w_down^T where the fused kernel takes the shape and is the
// faster path (NANOVLLM_FUSED_MLP: "auto" (unset) as measured in the decode step, one token;
// "on" wherever it runs; "off" never; NANOVLLM_FUSED_OUT_PROJ=off leaves post_norm's output
// projection to the caller); false, nothing done, elsewhere (the caller runs the
// projections one by one). act is silu_and_mul's exact form of the bf16-rounded
// gate and up sums (as the two-kernel path gives), y each sum rounded once.
// x: [M, H] bf16; w_gate_up: [2I, H] bf16 = [gate; up], contiguous; w_down: [H, I] bf16,
// contiguous; act: [M, I] bf16 scratch (written); y: [M, H] bf16 (row strides may exceed the
// widths; y may be x); barrier: the call site's own counter, 8 zeroed device bytes; post_norm:
// null, or the norm to take first (x is then the attention block's output).
bool fused_mlp(const TensorView& y, const TensorView& x, const TensorView& w_gate_up,
               const TensorView& w_down, const TensorView& act, uint64_t* barrier,
               const FusedMlpNorm* post_norm, const ExecContext& ctx);
// The same wherever the kernel takes the shape and layout, whatever the rule and
// NANOVLLM_FUSED_MLP say (the kernel's tests).
bool fused_mlp_any_rule(const TensorView& y, const TensorView& x, const TensorView& w_gate_up,
                        const TensorView& w_down, const TensorView& act, uint64_t* barrier,
                        const FusedMlpNorm* post_norm, const ExecContext& ctx);

}  // namespace cuda

// The fused MLP on CUDA where it takes the shape; false on the CPU (the caller runs the
// projections one by one).
inline bool fused_mlp(const TensorView& y, const TensorView& x, const TensorView& w_gate_up,
                      const TensorView& w_down, const TensorView& act, uint64_t* barrier,
                      const FusedMlpNorm* post_norm, const ExecContext& ctx) {
  return !x.on_cpu() && cuda::fused_mlp(y, x, w_gate_up, w_down, act, barrier, post_norm, ctx);
}

}  // namespace nanovllm::kernels
