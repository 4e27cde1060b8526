#pragma once

#include "kernels/activation.h"
#include "kernels/exec_context.h"
#include "kernels/rotary.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// y = x @ w^T (+ bias), f32 accumulation.
// x: [M, K] bf16 (row stride may exceed K); w: [N, K] bf16 (the checkpoint's layout);
// bias: [N] bf16 or data == nullptr; y: [M, N] bf16 or f32 (f32 for logits).
namespace cpu {
void linear(const TensorView& y, const TensorView& x, const TensorView& w, const TensorView& bias,
            int threads);
}
namespace cuda {
// Decode sizes (M <= 64) run our skinny GEMM (kernels/skinny_gemm.h) or, on an H100/H200, the
// Hopper decode GEMM (kernels/hopper_gemm.h) where one beats cuBLAS (the rules in linear.cu,
// measured in the decode step), else cuBLAS. behind_norm: x was just written by an RMSNorm,
// which lets this GEMM launch at its start (the Hopper GEMM's rule takes only such GEMMs).
// NANOVLLM_DECODE_GEMM=off never takes the Hopper GEMM, =hopper takes it wherever it runs
// (comparisons; another value than those or auto stops the run naming the variable).
void linear(const TensorView& y, const TensorView& x, const TensorView& w, const TensorView& bias,
            const ExecContext& ctx, bool behind_norm = false);
// y = silu_and_mul(gate_up) @ w^T (+ bias): on the skinny path at up to 8 tokens one kernel
// (the activation computed as the weights stream in), else silu_and_mul into act and then
// linear.
// gate_up: [M, 2K] bf16; act: [M, K] bf16 scratch (untouched on the fused path).
void linear_silu_mul(const TensorView& y, const TensorView& gate_up, const TensorView& act,
                     const TensorView& w, const TensorView& bias, const ExecContext& ctx);
// act = silu_and_mul(x @ w^T) in one kernel where the skinny GEMM serves the gate_up projection
// at up to 8 tokens, or the Hopper decode GEMM at 9-32 (the activation in its epilogue,
// bit-identical to the two steps; x is taken to be an RMSNorm's output, as the MLP's is); false
// (nothing done) elsewhere, with a bias, or under NANOVLLM_MLP_ACTIVATION=down, where the caller
// takes the two steps (the activation then fused into the down projection: linear_silu_mul).
// Measured in the decode step: bench/README.md, issue 33. x: [M, K] bf16; w: [2I, K] bf16 =
// [gate; up]; act: [M, I] bf16.
bool linear_gate_up_act(const TensorView& act, const TensorView& x, const TensorView& w,
                        const TensorView& bias, const ExecContext& ctx);
// The attention's qkv projection with qk_norm_rope_store's work (kernels/rotary.h) in one kernel
// where the Hopper decode GEMM serves the projection (its rule, 9-32 tokens behind the input
// norm) and its qkv form takes the step (kernels/hopper_gemm.h: head dim 128, bf16 cache, no
// bias): qkv then holds the rotated q and k and the cache the token's k and v, bit-identical to
// that GEMM followed by qk_norm_rope_store. False (nothing done) elsewhere, or under
// NANOVLLM_QKV_ROPE=apart (comparisons; another value than auto or apart stops the run).
// x: [M, K] bf16; w: [(Hq + 2 Hkv) D, K] bf16; qkv: [M, (Hq + 2 Hkv) D] bf16.
bool linear_qkv_rope_store(const TensorView& qkv, const TensorView& x, const TensorView& w,
                           const TensorView& bias, const QkvRopeStore& r, const ExecContext& ctx);
}  // namespace cuda

inline void linear(const TensorView& y, const TensorView& x, const TensorView& w,
                   const TensorView& bias, const ExecContext& ctx, bool behind_norm = false) {
  if (x.on_cpu())
    cpu::linear(y, x, w, bias, ctx.cpu_threads);
  else
    cuda::linear(y, x, w, bias, ctx, behind_norm);
}

// The MLP's down projection with its input activation (kernels/activation.h): on the CPU
// silu_and_mul into act, then linear; on CUDA cuda::linear_silu_mul.
inline void linear_silu_mul(const TensorView& y, const TensorView& gate_up, const TensorView& act,
                            const TensorView& w, const TensorView& bias, const ExecContext& ctx) {
  if (!gate_up.on_cpu()) return cuda::linear_silu_mul(y, gate_up, act, w, bias, ctx);
  cpu::silu_and_mul(act, gate_up);
  cpu::linear(y, act, w, bias, ctx.cpu_threads);
}

// The MLP's gate_up projection and activation in one kernel where CUDA's
// cuda::linear_gate_up_act takes the shape; false on the CPU and elsewhere.
inline bool linear_gate_up_act(const TensorView& act, const TensorView& x, const TensorView& w,
                               const TensorView& bias, const ExecContext& ctx) {
  return !x.on_cpu() && cuda::linear_gate_up_act(act, x, w, bias, ctx);
}

// The qkv projection and qk_norm_rope_store in one kernel where CUDA's
// cuda::linear_qkv_rope_store takes the step; false on the CPU and elsewhere.
inline bool linear_qkv_rope_store(const TensorView& qkv, const TensorView& x, const TensorView& w,
                                  const TensorView& bias, const QkvRopeStore& r,
                                  const ExecContext& ctx) {
  return !x.on_cpu() && cuda::linear_qkv_rope_store(qkv, x, w, bias, r, ctx);
}

}  // namespace nanovllm::kernels
