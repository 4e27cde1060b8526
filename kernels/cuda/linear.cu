// y = x @ w^T (+ bias): decode sizes through our skinny GEMM or the Hopper decode GEMM where
// one is the faster path, everything else through cuBLAS: bf16 operands, f32 accumulation
// (CUBLAS_COMPUTE_32F), bf16 or f32 output. On the cuBLAS path a bias is broadcast into y first and
// the GEMM adds onto it (beta = 1), so y is rounded once.
#include <cublas_v2.h>

#include <cstdlib>
#include <cstring>
#include <optional>

#include "kernels/cuda/common.cuh"
#include "kernels/hopper_gemm.h"
#include "kernels/linear.h"
#include "kernels/skinny_gemm.h"

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

// The skinny GEMM's config for this shape, or none where cuBLAS is the faster path. The rule
// is bench/gemm_bench's verdict on an H200 (both paths timed inside CUDA graphs, weights from
// HBM): the skinny GEMM wins at M <= 8, at M = 16 only on the short-N, mid-K shapes (0.6B's
// o_proj and down_proj, 8B's o_proj), and cuBLAS wins from M = 32 on. The config is the list's
// best guess; programmatic dependent launch (the weights stream in while the previous kernel
// ends) paid on the small weights (N * K <= 8M), not always on the 8B shapes.
std::optional<SkinnyGemmConfig> skinny_choice(int64_t m, int64_t n, int64_t k, bool silu_mul,
                                              const ExecContext& ctx) {
  if (ctx.cublas_only || !skinny_gemm_supports(m, n, k)) return {};
  const bool wins = m <= 8 || (m <= 16 && n <= 4096 && k >= 2048 && k <= 4096);
  if (!wins) return {};
  std::vector<SkinnyGemmConfig> configs = skinny_gemm_configs(m, n, k, silu_mul);
  if (configs.empty()) return {};
  configs.front().pdl = n * k <= (int64_t{8} << 20);
  return configs.front();
}

// NANOVLLM_DECODE_GEMM: "hopper" runs the Hopper decode GEMM wherever it supports the size,
// "cublas" never, unset or "auto" where hopper_wins (the comparisons of bench/ use the first
// two).
enum class DecodeGemm { kAuto, kHopper, kCublas };
DecodeGemm decode_gemm_setting() {
  static const DecodeGemm v = [] {
    const char* e = std::getenv("NANOVLLM_DECODE_GEMM");
    if (e == nullptr || *e == 0 || std::strcmp(e, "auto") == 0) return DecodeGemm::kAuto;
    if (std::strcmp(e, "hopper") == 0) return DecodeGemm::kHopper;
    CHECK_MSG(std::strcmp(e, "cublas") == 0,
              "NANOVLLM_DECODE_GEMM must be auto, hopper or cublas, not '" << e << "'");
    return DecodeGemm::kCublas;
  }();
  return v;
}

// Where the Hopper decode GEMM is the faster path (H200, 0.6B shapes): 8 < M <= 32 on weights
// of at most 8M elements. In bench/gemm_bench (graphs, weights from HBM) it runs the short-N,
// long-K projections (o_proj, down_proj) 1.36-1.75x faster than cuBLAS and ahead of the skinny
// GEMM at M = 16, with its cluster split-K filling the GPU; qkv and gate_up are 0.83-1.02x
// there, but in the decode step its programmatic launch overlaps the norm before it, which
// cuBLAS cannot. From M = 64 on cuBLAS is 1.3-4x faster (the kernel re-reads x per block);
// larger weights were not measured.
bool hopper_wins(int64_t m, int64_t n, int64_t k) {
  return m > 8 && m <= 32 && n * k <= (int64_t{8} << 20);
}

// The Hopper decode GEMM's config for this size, or none. Launched with programmatic dependent
// launch: its first weights stream in while the kernel before it ends, which is most of what it
// gains over cuBLAS at these sizes.
std::optional<HopperGemmConfig> hopper_choice(int64_t m, int64_t n, int64_t k,
                                              const ExecContext& ctx) {
  const DecodeGemm setting = decode_gemm_setting();
  if (ctx.cublas_only || setting == DecodeGemm::kCublas ||
      (setting == DecodeGemm::kAuto && !hopper_wins(m, n, k)) || !hopper_gemm_supports(m, n, k))
    return {};
  std::vector<HopperGemmConfig> configs = hopper_gemm_configs(m, n, k);
  if (configs.empty()) return {};
  configs.front().pdl = true;
  return configs.front();
}

void cublas_linear(const TensorView& y, const TensorView& x, const TensorView& w,
                   const TensorView& bias, const ExecContext& ctx) {
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  check_cuda_tensor(w, DType::kBf16, "linear w");
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

void check_linear(const TensorView& y, const TensorView& x, const TensorView& w, int64_t k) {
  check_cuda_tensor(x, DType::kBf16, "linear x");
  check_cuda_tensor(w, DType::kBf16, "linear w");
  CHECK_MSG(y.dtype == DType::kBf16 || y.dtype == DType::kF32, "linear y must be bf16 or f32");
  check_cuda_tensor(y, y.dtype, "linear y");
  CHECK_EQ(x.ndim, 2);
  CHECK_EQ(w.ndim, 2);
  CHECK_EQ(y.ndim, 2);
  CHECK_EQ(w.size(1), k);
  CHECK_EQ(y.size(0), x.size(0));
  CHECK_EQ(y.size(1), w.size(0));
}

}  // namespace

void linear(const TensorView& y, const TensorView& x, const TensorView& w, const TensorView& bias,
            const ExecContext& ctx) {
  check_linear(y, x, w, x.size(1));
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  if (m == 0 || n == 0) return;
  if (const std::optional<HopperGemmConfig> cfg = hopper_choice(m, n, k, ctx)) {
    hopper_gemm(y, x, w, bias, *cfg, ctx.stream);
    return;
  }
  if (const std::optional<SkinnyGemmConfig> cfg = skinny_choice(m, n, k, false, ctx)) {
    skinny_gemm(y, x, w, bias, *cfg, ctx.stream);
    return;
  }
  CHECK_MSG(ctx.cublas != nullptr, "linear needs a cuBLAS handle in the ExecContext");
  cublas_linear(y, x, w, bias, ctx);
}

void linear_silu_mul(const TensorView& y, const TensorView& gate_up, const TensorView& act,
                     const TensorView& w, const TensorView& bias, const ExecContext& ctx) {
  check_cuda_tensor(gate_up, DType::kBf16, "linear_silu_mul gate_up");
  CHECK_EQ(gate_up.ndim, 2);
  const int64_t m = gate_up.size(0), k = gate_up.size(1) / 2, n = w.size(0);
  CHECK_EQ(gate_up.size(1), 2 * k);
  check_linear(y, act, w, k);
  CHECK_EQ(act.size(0), m);
  if (m == 0 || n == 0) return;
  const std::optional<HopperGemmConfig> hopper = hopper_choice(m, n, k, ctx);
  if (const std::optional<SkinnyGemmConfig> cfg =
          hopper ? std::nullopt : skinny_choice(m, n, k, true, ctx)) {
    skinny_gemm_silu_mul(y, gate_up, w, bias, *cfg, ctx.stream);
    return;
  }
  silu_and_mul(act, gate_up, ctx.stream);
  if (hopper) {
    hopper_gemm(y, act, w, bias, *hopper, ctx.stream);
    return;
  }
  CHECK_MSG(ctx.cublas != nullptr, "linear needs a cuBLAS handle in the ExecContext");
  cublas_linear(y, act, w, bias, ctx);
}

}  // namespace nanovllm::kernels::cuda
