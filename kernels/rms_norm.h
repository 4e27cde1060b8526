#pragma once

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// rms_norm:        out = x / sqrt(mean(x^2) + eps) * weight            (f32 math)
// fused_add_rms_norm: residual = bf16(x + residual); x = rms_norm(residual) * weight
//   (the sum is rounded to bf16 before the norm, as transformers does in bf16)
// x, out, residual: [T, H] bf16, rows may be strided, last dim contiguous; weight: [H] bf16.
namespace cpu {
void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps);
void fused_add_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight,
                        float eps);
}  // namespace cpu
namespace cuda {
void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps,
              cudaStream_t stream);
void fused_add_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight,
                        float eps, cudaStream_t stream);
}  // namespace cuda

inline void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight,
                     float eps, const ExecContext& ctx) {
  if (x.on_cpu())
    cpu::rms_norm(out, x, weight, eps);
  else
    cuda::rms_norm(out, x, weight, eps, ctx.stream);
}
inline void fused_add_rms_norm(const TensorView& x, const TensorView& residual,
                               const TensorView& weight, float eps, const ExecContext& ctx) {
  if (x.on_cpu())
    cpu::fused_add_rms_norm(x, residual, weight, eps);
  else
    cuda::fused_add_rms_norm(x, residual, weight, eps, ctx.stream);
}

}  // namespace nanovllm::kernels
