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
void silu_and_mul(const TensorView& out, const TensorView& x, cudaStream_t stream);
}

inline void silu_and_mul(const TensorView& out, const TensorView& x, const ExecContext& ctx) {
  if (x.on_cpu())
    cpu::silu_and_mul(out, x);
  else
    cuda::silu_and_mul(out, x, ctx.stream);
}

}  // namespace nanovllm::kernels
