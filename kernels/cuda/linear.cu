// y = x @ w^T (+ bias) through cuBLAS: bf16 operands, f32 accumulation (CUBLAS_COMPUTE_32F),
// bf16 or f32 output. A bias is broadcast into y first and the GEMM adds onto it (beta = 1),
// so y is rounded once.
#include <cublas_v2.h>

#include "kernels/cuda/common.cuh"
#include "kernels/linear.h"

namespace nanovllm::kernels::cuda {
namespace {

// y: [M, N] (row stride ld), bias: [N].
template <typename T>
__global__ void broadcast_bias_kernel(T* y, int64_t ld, const bf16* __restrict__ bias, int n) {
  const int64_t row = blockIdx.y;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if constexpr (sizeof(T) == 4)
      y[row * ld + i] = to_f32(bias[i]);
    else
      y[row * ld + i] = bias[i];
  }
}

}  // namespace

void linear(const TensorView& y, const TensorView& x, const TensorView& w, const TensorView& bias,
            const ExecContext& ctx) {
  check_cuda_tensor(x, DType::kBf16, "linear x");
  check_cuda_tensor(w, DType::kBf16, "linear w");
  CHECK_MSG(y.dtype == DType::kBf16 || y.dtype == DType::kF32, "linear y must be bf16 or f32");
  check_cuda_tensor(y, y.dtype, "linear y");
  CHECK_MSG(ctx.cublas != nullptr, "linear needs a cuBLAS handle in the ExecContext");
  CHECK_EQ(x.ndim, 2);
  CHECK_EQ(w.ndim, 2);
  CHECK_EQ(y.ndim, 2);
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  CHECK_EQ(w.size(1), k);
  CHECK_EQ(y.size(0), m);
  CHECK_EQ(y.size(1), n);
  if (m == 0 || n == 0) return;
  const bool has_bias = bias.data != nullptr;
  if (has_bias) {
    check_cuda_tensor(bias, DType::kBf16, "linear bias");
    CHECK_EQ(bias.numel(), n);
    CHECK_LE(m, 65535);
    const dim3 grid(ceil_div(n, 256), static_cast<unsigned>(m));
    if (y.dtype == DType::kF32)
      broadcast_bias_kernel<float><<<grid, 256, 0, ctx.stream>>>(
          y.ptr<float>(), y.stride[0], bias.ptr<bf16>(), static_cast<int>(n));
    else
      broadcast_bias_kernel<bf16><<<grid, 256, 0, ctx.stream>>>(
          y.ptr<bf16>(), y.stride[0], bias.ptr<bf16>(), static_cast<int>(n));
    CUDA_CHECK_LAUNCH();
  }
  CUBLAS_CHECK(cublasSetStream(ctx.cublas, ctx.stream));
  if (ctx.cublas_workspace != nullptr)
    CUBLAS_CHECK(cublasSetWorkspace(ctx.cublas, ctx.cublas_workspace, ctx.cublas_workspace_bytes));
  // Row-major y[M,N] is column-major y^T[N,M] = w[N,K] (col-major K x N, transposed) times
  // x^T (col-major K x M).
  const float alpha = 1.f, beta = has_bias ? 1.f : 0.f;
  const cudaDataType_t y_type = y.dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  CUBLAS_CHECK(
      cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                   static_cast<int>(k), &alpha, w.data, CUDA_R_16BF, static_cast<int>(w.stride[0]),
                   x.data, CUDA_R_16BF, static_cast<int>(x.stride[0]), &beta, y.data, y_type,
                   static_cast<int>(y.stride[0]), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace nanovllm::kernels::cuda
