#pragma once

#include "kernels/exec_context.h"
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
void linear(const TensorView& y, const TensorView& x, const TensorView& w, const TensorView& bias,
            const ExecContext& ctx);
}

inline void linear(const TensorView& y, const TensorView& x, const TensorView& w,
                   const TensorView& bias, const ExecContext& ctx) {
  if (x.on_cpu())
    cpu::linear(y, x, w, bias, ctx.cpu_threads);
  else
    cuda::linear(y, x, w, bias, ctx);
}

}  // namespace nanovllm::kernels
