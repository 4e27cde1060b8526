// y = x @ w^T (+ bias): decode sizes through our skinny GEMM or the Hopper decode GEMM where
// one is the faster path, everything else through cuBLAS: bf16 operands, f32 accumulation
// (CUBLAS_COMPUTE_32F), bf16 or f32 output. On the cuBLAS path a bias is broadcast into y first and
// the GEMM adds onto it (beta = 1), so y is rounded once.
#include <cublas_v2.h>

#include <optional>

#include "kernels/cuda/common.cuh"
#include "kernels/env_choice.h"
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

// The largest weights (N * K) whose skinny GEMM is launched early (programmatic dependent
// launch: its weights stream in while the previous kernel ends). Measured on the 8B shape's
// decode step at batch 1-8 (4 H200s, bench/results/h200x4-2026-11-27-issue31_early_launch.txt):
// early launches up to 50M weights took 2-3 % off batch 1 and 4 at tp 1, 2 and 4 (all of tp 2's
// and tp 4's shards, tp 1's qkv_proj, o_proj and down_proj); tp 1's gate_up_proj (101M) lost 5 %.
constexpr int64_t kSkinnyEarlyMaxWeights = int64_t{64} << 20;

// Weights (N * K) above which the skinny GEMM serves at most 2 tokens, and above which it
// serves one token only (the weights it does not launch early); cuBLAS takes the rest. Timed
// in the 8B shape's decode step (bench/results/h200-2026-11-27-issue33_big_weights.txt). At
// tp 1 on an H200, cuBLAS for qkv_proj (25M), gate_up_proj (100M) and down_proj (50M) from 2
// tokens took batch 4 from 5.72 to 5.21-5.28 ms and batch 8 from 6.27-6.32 to 5.45-5.48.
// Keeping the skinny GEMM at 2 tokens for the weights up to 64M measured the same there and
// took tp 2's batch 2 (its gate_up and down shards, 50M and 25M) from 3.37-3.38 to 3.29-3.34
// ms on two H200s, 4.18-4.19 to 3.96-3.97 on two H100s. At 3-4 tokens the skinny GEMM lost
// 4-5 % on these weights at tp 1 on the H200.
constexpr int64_t kSkinnyTwoTokensAbove = int64_t{16} << 20;
constexpr int64_t kSkinnyOneTokenAbove = kSkinnyEarlyMaxWeights;

// The skinny GEMM's config for this shape, or none where cuBLAS is the faster path. The rule
// is bench/gemm_bench's verdict on an H200 (both paths timed inside CUDA graphs, weights from
// HBM): the skinny GEMM wins at M <= 8, at M = 16 only on the short-N, mid-K shapes (0.6B's
// o_proj and down_proj, 8B's o_proj), and cuBLAS wins from M = 32 on; inside the decode step,
// weights over kSkinnyTwoTokensAbove go to cuBLAS from 3 tokens, over kSkinnyOneTokenAbove
// from 2. The config is the list's best guess; kSkinnyEarlyMaxWeights says which shapes launch
// early.
std::optional<SkinnyGemmConfig> skinny_choice(int64_t m, int64_t n, int64_t k, bool silu_mul,
                                              const ExecContext& ctx) {
  if (ctx.cublas_only || !skinny_gemm_supports(m, n, k)) return {};
  if ((m > 1 && n * k > kSkinnyOneTokenAbove) || (m > 2 && n * k > kSkinnyTwoTokensAbove))
    return {};
  const bool wins = m <= 8 || (m <= 16 && n <= 4096 && k >= 2048 && k <= 4096);
  if (!wins) return {};
  std::vector<SkinnyGemmConfig> configs = skinny_gemm_configs(m, n, k, silu_mul);
  if (configs.empty()) return {};
  configs.front().pdl = n * k <= kSkinnyEarlyMaxWeights;
  static const SkinnyNextLaunch choice =
      env_enum("NANOVLLM_SKINNY_NEXT_LAUNCH", {std::pair{"start", SkinnyNextLaunch::kStart},
                                               {"after-wait", SkinnyNextLaunch::kAfterWait},
                                               {"auto", SkinnyNextLaunch::kAuto}});
  configs.front().next_after_wait = skinny_next_launch_after_wait(ctx.tp_size, choice);
  return configs.front();
}

// NANOVLLM_DECODE_GEMM (read once): "auto" (unset) takes the Hopper decode GEMM where
// hopper_gemm_wins says, "hopper" wherever it supports the size (1-64 tokens, ahead of the skinny
// GEMM), "off" never (whole-run comparisons).
enum class DecodeGemm { kAuto, kHopper, kOff };
DecodeGemm decode_gemm_setting() {
  static const DecodeGemm v =
      env_enum("NANOVLLM_DECODE_GEMM", {std::pair{"auto", DecodeGemm::kAuto},
                                        {"hopper", DecodeGemm::kHopper},
                                        {"off", DecodeGemm::kOff}});
  return v;
}

// The Hopper decode GEMM's config for this size (n: output rows; gate_up_act: act rows, w has
// 2n), or none. Always launched early (programmatic dependent launch): requesting its weights
// while the kernel before it ends is what it is for.
std::optional<HopperGemmConfig> hopper_choice(int64_t m, int64_t n, int64_t k, bool gate_up_act,
                                              bool behind_norm, const ExecContext& ctx) {
  const DecodeGemm setting = decode_gemm_setting();
  if (ctx.cublas_only || setting == DecodeGemm::kOff ||
      (setting == DecodeGemm::kAuto &&
       !hopper_gemm_wins(m, gate_up_act ? 2 * n : n, k, behind_norm)))
    return {};
  return hopper_gemm_decode_config(m, n, k, gate_up_act, behind_norm);
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
            const ExecContext& ctx, bool behind_norm) {
  check_linear(y, x, w, x.size(1));
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  if (m == 0 || n == 0) return;
  if (const std::optional<HopperGemmConfig> cfg = hopper_choice(m, n, k, false, behind_norm, ctx)) {
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

// The most tokens for which the MLP's activation is fused into the down projection's skinny
// GEMM: every block recomputes the activation of its K range for every token, which at 9-16
// tokens costs more than the separate silu_and_mul launch it saves. Measured in the 0.6B
// decode step on an H200 (three rounds, bench/results/h200-2026-11-27-issue33_silu_split.txt):
// batch 16 1.72-1.77 ms fused against 1.66-1.67 separate, batch 12 1.61-1.66 against
// 1.57-1.59; batch 4-8 the same either way.
constexpr int64_t kSkinnySiluMulMaxM = 8;

void linear_silu_mul(const TensorView& y, const TensorView& gate_up, const TensorView& act,
                     const TensorView& w, const TensorView& bias, const ExecContext& ctx) {
  check_cuda_tensor(gate_up, DType::kBf16, "linear_silu_mul gate_up");
  CHECK_EQ(gate_up.ndim, 2);
  const int64_t m = gate_up.size(0), k = gate_up.size(1) / 2, n = w.size(0);
  CHECK_EQ(gate_up.size(1), 2 * k);
  check_linear(y, act, w, k);
  CHECK_EQ(act.size(0), m);
  if (m == 0 || n == 0) return;
  const std::optional<HopperGemmConfig> hopper = hopper_choice(m, n, k, false, false, ctx);
  if (m <= kSkinnySiluMulMaxM && !hopper) {
    if (const std::optional<SkinnyGemmConfig> fused = skinny_choice(m, n, k, true, ctx)) {
      skinny_gemm_silu_mul(y, gate_up, w, bias, *fused, ctx.stream);
      return;
    }
  }
  // The Hopper GEMM, the skinny GEMM or cuBLAS, by the same rules as any linear (not behind a
  // norm); the activation launches early only before our GEMMs (kernels/activation.h says why).
  const std::optional<SkinnyGemmConfig> cfg =
      hopper ? std::nullopt : skinny_choice(m, n, k, false, ctx);
  silu_and_mul(act, gate_up, ctx.stream, cfg.has_value() || hopper.has_value());
  if (hopper) {
    hopper_gemm(y, act, w, bias, *hopper, ctx.stream);
    return;
  }
  if (cfg) {
    skinny_gemm(y, act, w, bias, *cfg, ctx.stream);
    return;
  }
  CHECK_MSG(ctx.cublas != nullptr, "linear needs a cuBLAS handle in the ExecContext");
  cublas_linear(y, act, w, bias, ctx);
}

bool linear_gate_up_act(const TensorView& act, const TensorView& x, const TensorView& w,
                        const TensorView& bias, const ExecContext& ctx) {
  // NANOVLLM_MLP_ACTIVATION (read once): "gate_up" (unset) or "down", where the activation of
  // the decode sizes goes (whole-run comparisons).
  static const bool in_down =
      env_choice("NANOVLLM_MLP_ACTIVATION", {"gate_up", "down", "auto"}) == "down";
  check_cuda_tensor(x, DType::kBf16, "linear_gate_up_act x");
  check_cuda_tensor(w, DType::kBf16, "linear_gate_up_act w");
  check_cuda_tensor(act, DType::kBf16, "linear_gate_up_act act");
  CHECK(x.ndim == 2 && w.ndim == 2 && act.ndim == 2);
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  CHECK_EQ(w.size(1), k);
  CHECK_EQ(n % 2, 0);
  CHECK_EQ(act.size(0), m);
  CHECK_EQ(act.size(1), n / 2);
  if (in_down || bias.data != nullptr || m == 0) return false;
  if (const std::optional<HopperGemmConfig> hopper = hopper_choice(m, n / 2, k, true, true, ctx)) {
    hopper_gemm_gate_up_act(act, x, w, *hopper, ctx.stream);
    return true;
  }
  if (m > kSkinnySiluMulMaxM) return false;
  // The gate_up GEMM's own config: the same blocks, rows and K split, half of the rows out.
  const std::optional<SkinnyGemmConfig> cfg = skinny_choice(m, n, k, false, ctx);
  if (!cfg) return false;
  skinny_gemm_gate_up_act(act, x, w, *cfg, ctx.stream);
  return true;
}

bool linear_qkv_rope_store(const TensorView& qkv, const TensorView& x, const TensorView& w,
                           const TensorView& bias, const QkvRopeStore& r, const ExecContext& ctx) {
  static const bool apart = env_choice("NANOVLLM_QKV_ROPE", {"auto", "apart"}) == "apart";
  check_cuda_tensor(x, DType::kBf16, "linear_qkv_rope_store x");
  check_cuda_tensor(w, DType::kBf16, "linear_qkv_rope_store w");
  CHECK(x.ndim == 2 && w.ndim == 2);
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  if (apart || m == 0 || !hopper_gemm_qkv_rope_supports(m, n, k, r, bias.data != nullptr) ||
      !hopper_choice(m, n, k, false, true, ctx))
    return false;
  hopper_gemm_qkv_rope(qkv, x, w, r, hopper_gemm_qkv_rope_config(m, n, k), ctx.stream);
  return true;
}

}  // namespace nanovllm::kernels::cuda
