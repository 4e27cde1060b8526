#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// out = silu(gate) * up, with x = [gate | up] along the last dim (merged gate_up projection).
// x: [T, 2I] bf16, out: [T, I] bf16.
namespace cpu {
void silu_and_mul(const TensorView& out, const TensorView& x);
}
namespace cuda {
// launch_early: a programmatic dependent launch (kernels/cuda/common.cuh): the kernel may start
// while the one before it ends and waits for it first. It pays before our skinny GEMM (which
// then streams its weights early in turn) and costs about 1 % before cuBLAS at 32-256 tokens
// (bench/results/h200-2026-11-27-issue33_silu_split.txt), so the caller chooses.
void silu_and_mul(const TensorView& out, const TensorView& x, cudaStream_t stream,
                  bool launch_early = false);
}  // namespace cuda

inline void silu_and_mul(const TensorView& out, const TensorView& x, const ExecContext& ctx) {
  if (x.on_cpu())
    cpu::silu_and_mul(out, x);
  else
    cuda::silu_and_mul(out, x, ctx.stream);
}

}  // namespace nanovllm::kernels
