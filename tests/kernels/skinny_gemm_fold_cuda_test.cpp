// The skinny GEMM's folded forms (kernels/skinny_gemm.h), for every kernel variant:
// skinny_gemm_rms_norm against the CPU's rms_norm then linear (every element, rows of very
// different scales), and skinny_gemm_add / skinny_gemm_silu_mul_add against skinny_gemm /
// skinny_gemm_silu_mul then the residual sum, bit for bit. Also: the folded forms wait for the
// kernel that writes their input under programmatic dependent launch, and the rule that picks
// them (host only).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "kernels/linear.h"
#include "kernels/rms_norm.h"
#include "kernels/skinny_gemm.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

using kernels::SkinnyGemmConfig;

constexpr float kEps = 1e-6f;

// Every kernel variant, whether or not the heuristic would offer it.
std::vector<SkinnyGemmConfig> every_variant() {
  std::vector<SkinnyGemmConfig> out;
  for (int rows : {16, 32, 64})
    for (int warps : {4, 8})
      for (int cluster : {1, 2, 4, 8}) out.push_back({rows, warps, cluster});
  return out;
}

struct Shape {
  int64_t m, n, k;
  bool bias;
};

std::string describe(const Shape& s, const SkinnyGemmConfig& cfg) {
  std::ostringstream os;
  os << "M=" << s.m << " N=" << s.n << " K=" << s.k << (s.bias ? " bias " : " ") << cfg.name();
  return os.str();
}

TensorView no_bias() {
  TensorView v;
  v.device = Device::kCuda;
  return v;
}

// A [rows, cols] view of d with row stride pitch.
template <typename T>
TensorView strided(const DevVec<T>& d, int64_t rows, int64_t cols, int64_t pitch) {
  TensorView v = d.view(DType::kBf16, {rows, cols});
  v.stride[0] = pitch;
  return v;
}

TEST(SkinnyGemmFoldCuda, RmsNormInputMatchesCpuNormThenLinearForEveryVariant) {
  SKIP_WITHOUT_CUDA();
  // 0.6B's qkv and gate_up, a long K, and K = 200 (a partial chunk, empty cluster ranks).
  for (const Shape& s : {Shape{1, 4096, 1024, false}, Shape{3, 6144, 1024, true},
                         Shape{8, 1000, 2048, false}, Shape{5, 333, 200, true}}) {
    std::mt19937 rng(static_cast<uint32_t>(s.m * 7 + s.k));
    const int64_t pitch = s.k + 24;  // the residual's rows are strided
    auto residual = random_bf16(s.m * pitch, rng, -3.f, 3.f);
    // Rows of very different scales: a scale applied to the wrong token shows.
    for (int64_t r = 0; r < s.m; ++r)
      for (int64_t i = 0; i < s.k; ++i) {
        uint16_t& v = residual[r * pitch + i];
        v = float_to_bf16(bf16_to_float(v) * static_cast<float>(1 << (2 * r)));
      }
    auto norm_w = random_bf16(s.k, rng, 0.5f, 1.5f);
    auto w = random_bf16(s.n * s.k, rng, -0.1f, 0.1f);
    auto b = random_bf16(s.n, rng);
    const DevVec<uint16_t> dres(residual), dnw(norm_w), dw(w), db(b), y(s.m * s.n);
    const TensorView res = strided(dres, s.m, s.k, pitch), nw = dnw.view(DType::kBf16, {s.k});
    const TensorView wv = dw.view(DType::kBf16, {s.n, s.k});
    const TensorView bias = s.bias ? db.view(DType::kBf16, {s.n}) : no_bias();

    // The CPU reference: rms_norm, then linear.
    std::vector<uint16_t> h(s.m * s.k), ref_bits(s.m * s.n);
    TensorView hres = host_view(residual.data(), DType::kBf16, {s.m, s.k});
    hres.stride[0] = pitch;
    kernels::cpu::rms_norm(host_view(h.data(), DType::kBf16, {s.m, s.k}), hres,
                           host_view(norm_w.data(), DType::kBf16, {s.k}), kEps);
    kernels::cpu::linear(host_view(ref_bits.data(), DType::kBf16, {s.m, s.n}),
                         host_view(h.data(), DType::kBf16, {s.m, s.k}),
                         host_view(w.data(), DType::kBf16, {s.n, s.k}),
                         s.bias ? host_view(b.data(), DType::kBf16, {s.n}) : TensorView(), 2);
    double ss = 0;
    for (uint16_t v : ref_bits) ss += double{bf16_to_float(v)} * bf16_to_float(v);
    const double rms = std::sqrt(ss / static_cast<double>(ref_bits.size()));

    for (const SkinnyGemmConfig& cfg : every_variant()) {
      CUDA_CHECK(cudaMemset(y.mem.get(), 0xFF, y.mem.bytes()));
      kernels::cuda::skinny_gemm_rms_norm(y.view(DType::kBf16, {s.m, s.n}), res, nw, kEps, wv, bias,
                                          cfg, nullptr);
      CUDA_CHECK(cudaGetLastError());
      // Every element: the input is rounded at another point than the CPU's (before the scale,
      // not after it) and summed in another order, then rounded to bf16 (2^-8 relative).
      const std::vector<uint16_t> got = y.host();
      int64_t bad = 0, first = -1;
      for (size_t i = 0; i < got.size(); ++i) {
        const double g = bf16_to_float(got[i]), want = bf16_to_float(ref_bits[i]);
        if (!(std::abs(g - want) <= std::abs(want) / 64 + rms / 64) && bad++ == 0)
          first = static_cast<int64_t>(i);
      }
      EXPECT_EQ(bad, 0) << describe(s, cfg) << ": first bad element " << first << " got "
                        << bf16_to_float(got[std::max<int64_t>(first, 0)]) << " want "
                        << bf16_to_float(ref_bits[std::max<int64_t>(first, 0)]);
    }
  }
}

// residual + bf16(x @ w^T) as the unfolded path rounds it: the product to bf16, then the sum.
void check_add_fold(const Shape& s, bool silu_mul) {
  std::mt19937 rng(static_cast<uint32_t>(s.n + s.k + silu_mul));
  const int64_t x_width = silu_mul ? 2 * s.k : s.k, r_pitch = s.n + 5;
  const auto x = random_bf16(s.m * x_width, rng, -2.f, 2.f);
  const auto residual = random_bf16(s.m * r_pitch, rng, -3.f, 3.f);
  const auto w = random_bf16(s.n * s.k, rng, -0.1f, 0.1f);
  const auto b = random_bf16(s.n, rng);
  const DevVec<uint16_t> dx(x), dw(w), db(b), y(s.m * s.n);
  DevVec<uint16_t> dres(residual);
  const TensorView xv = dx.view(DType::kBf16, {s.m, x_width});
  const TensorView wv = dw.view(DType::kBf16, {s.n, s.k});
  const TensorView bias = s.bias ? db.view(DType::kBf16, {s.n}) : no_bias();
  const TensorView res = strided(dres, s.m, s.n, r_pitch), yv = y.view(DType::kBf16, {s.m, s.n});
  for (const SkinnyGemmConfig& cfg : every_variant()) {
    const std::string what = describe(s, cfg) + (silu_mul ? " silu_mul" : "");
    if (silu_mul)
      kernels::cuda::skinny_gemm_silu_mul(yv, xv, wv, bias, cfg, nullptr);
    else
      kernels::cuda::skinny_gemm(yv, xv, wv, bias, cfg, nullptr);
    const std::vector<uint16_t> product = y.host();
    std::vector<uint16_t> want = residual;  // the row padding stays as it was
    for (int64_t r = 0; r < s.m; ++r)
      for (int64_t j = 0; j < s.n; ++j) {
        uint16_t& v = want[r * r_pitch + j];
        v = float_to_bf16(bf16_to_float(v) + bf16_to_float(product[r * s.n + j]));
      }
    dres.mem.upload(residual);
    if (silu_mul)
      kernels::cuda::skinny_gemm_silu_mul_add(res, xv, wv, bias, cfg, nullptr);
    else
      kernels::cuda::skinny_gemm_add(res, xv, wv, bias, cfg, nullptr);
    CUDA_CHECK(cudaGetLastError());
    const std::vector<uint16_t> got = dres.host();
    EXPECT_EQ(got, want) << what;
    EXPECT_NE(got, residual) << what << ": nothing was added";
  }
}

TEST(SkinnyGemmFoldCuda, ResidualAddOutputEqualsGemmThenSumBitForBit) {
  SKIP_WITHOUT_CUDA();
  // 0.6B's o_proj, an N past a tile with bias, and K = 200.
  for (const Shape& s :
       {Shape{1, 1024, 2048, false}, Shape{6, 1000, 1024, true}, Shape{8, 333, 200, true}})
    check_add_fold(s, false);
}

TEST(SkinnyGemmFoldCuda, SiluMulResidualAddOutputEqualsGemmThenSumBitForBit) {
  SKIP_WITHOUT_CUDA();
  // 0.6B's down_proj, and K = 200.
  for (const Shape& s : {Shape{1, 1024, 3072, false}, Shape{7, 333, 200, true}})
    check_add_fold(s, true);
}

// Launched with PDL right behind the kernel that writes their input (into a poisoned buffer
// each round), eagerly and in a graph: the result must equal the plain launch's.
TEST(SkinnyGemmFoldCuda, PdlLaunchWaitsForTheKernelThatWritesTheInput) {
  SKIP_WITHOUT_CUDA();
  const Shape s{4, 4096, 1024, true};
  std::mt19937 rng(90);
  const auto src = random_bf16(s.m * s.k, rng, -3.f, 3.f);
  const auto norm_w = random_bf16(s.k, rng, 0.5f, 1.5f);
  const auto w = random_bf16(s.n * s.k, rng, -0.1f, 0.1f);
  const auto b = random_bf16(s.n, rng);
  const auto residual0 = random_bf16(s.m * s.n, rng, -3.f, 3.f);
  const DevVec<uint16_t> dsrc(src), dnw(norm_w), dw(w), db(b), dres0(residual0);
  const DevVec<uint16_t> input(s.m * s.k), y(s.m * s.n), res(s.m * s.n);
  const TensorView in = input.view(DType::kBf16, {s.m, s.k}), nw = dnw.view(DType::kBf16, {s.k});
  const TensorView wv = dw.view(DType::kBf16, {s.n, s.k}), bias = db.view(DType::kBf16, {s.n});
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (bool add : {false, true}) {
    SkinnyGemmConfig cfg = kernels::skinny_gemm_configs(s.m, s.n, s.k).front();
    // input = rms_norm(src): the producer; then the folded GEMM reads it.
    const auto round = [&] {
      CUDA_CHECK(cudaMemsetAsync(input.mem.get(), 0xFF, input.mem.bytes(), stream));
      CUDA_CHECK(cudaMemcpyAsync(res.mem.get(), dres0.mem.get(), res.mem.bytes(),
                                 cudaMemcpyDeviceToDevice, stream));
      kernels::cuda::rms_norm(in, dsrc.view(DType::kBf16, {s.m, s.k}), nw, kEps, stream);
      if (add)
        kernels::cuda::skinny_gemm_add(res.view(DType::kBf16, {s.m, s.n}), in, wv, bias, cfg,
                                       stream);
      else
        kernels::cuda::skinny_gemm_rms_norm(y.view(DType::kBf16, {s.m, s.n}), in, nw, kEps, wv,
                                            bias, cfg, stream);
      CUDA_CHECK(cudaGetLastError());
    };
    const DevVec<uint16_t>& out = add ? res : y;
    cfg.pdl = false;
    round();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<uint16_t> want = out.host();
    EXPECT_TRUE(std::all_of(want.begin(), want.end(),
                            [](uint16_t v) { return std::isfinite(bf16_to_float(v)); }));
    cfg.pdl = true;
    CUDA_CHECK(cudaMemset(out.mem.get(), 0xFF, out.mem.bytes()));
    round();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(out.host(), want) << (add ? "add" : "rms_norm") << " eager";
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 3; ++i) round();
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaMemset(out.mem.get(), 0xFF, out.mem.bytes()));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(out.host(), want) << (add ? "add" : "rms_norm") << " graph";
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(SkinnyGemmFoldCuda, RejectsMoreThanEightTokensAndF32Output) {
  SKIP_WITHOUT_CUDA();
  const DevVec<uint16_t> x(9 * 64), nw(64), w(32 * 64), y(9 * 32);
  const DevVec<float> y32(32);
  const SkinnyGemmConfig cfg{16, 4, 1};
  EXPECT_THROW(
      kernels::cuda::skinny_gemm_rms_norm(
          y.view(DType::kBf16, {9, 32}), x.view(DType::kBf16, {9, 64}), nw.view(DType::kBf16, {64}),
          kEps, w.view(DType::kBf16, {32, 64}), no_bias(), cfg, nullptr),
      CheckError);
  EXPECT_THROW(
      kernels::cuda::skinny_gemm_add(y32.view(DType::kF32, {1, 32}), x.view(DType::kBf16, {1, 64}),
                                     w.view(DType::kBf16, {32, 64}), no_bias(), cfg, nullptr),
      CheckError);
}

TEST(LinearFolds, UpToEightTokensOnTheSkinnyPathWhenEnabled) {
  // Host only: runs without a GPU.
  ExecContext ctx;
  for (int64_t m = 1; m <= kernels::kSkinnyGemmMaxFoldM; ++m) {
    EXPECT_TRUE(kernels::cuda::linear_folds(m, 4096, 1024, ctx)) << m;  // 0.6B's qkv
    EXPECT_TRUE(kernels::cuda::linear_folds(m, 1024, 3072, ctx)) << m;  // and down_proj
  }
  EXPECT_FALSE(kernels::cuda::linear_folds(9, 4096, 1024, ctx));
  EXPECT_FALSE(kernels::cuda::linear_folds(0, 4096, 1024, ctx));
  EXPECT_FALSE(kernels::cuda::linear_folds(1, 4096, 1020, ctx));  // K % 8 != 0: no skinny path
  ctx.fold_norms = false;
  EXPECT_FALSE(kernels::cuda::linear_folds(1, 4096, 1024, ctx));
  ctx.fold_norms = true;
  ctx.cublas_only = true;
  EXPECT_FALSE(kernels::cuda::linear_folds(1, 4096, 1024, ctx));
}

}  // namespace
}  // namespace nanovllm::test
