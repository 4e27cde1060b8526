// Decode-size GEMMs of Qwen3-0.6B and Qwen3-8B: cuBLAS (kernels::cuda::linear) against every
// config of kernels::cuda::skinny_gemm and of kernels::cuda::hopper_gemm (sm_90 only; not for
// the fused silu input) that supports the size, side by side; for gate_up_proj also the Hopper
// GEMM with the activation in its epilogue ("hopper-act": it writes [M, N/2], so its bytes
// are counted as the plain GEMM's).
//
// Each figure is one CUDA graph of `calls` GEMMs launched several times (time_graph_us: the
// median launch over the calls in it), as the decode graphs run them, so host launch gaps are
// not counted. Consecutive calls read different weight copies (>= 256 MB of copies in all),
// so every call reads its weights from HBM, not from the L2.
//
// Columns: us per call; GB/s moved (x, w and y each once); that over the device-to-device copy
// bandwidth (bytes read + written, kernel_bench_util.cuh); and the limit ratio, limit / us with
// limit = max(bytes / copy bandwidth, FLOPs / bf16 peak), the peak measured by cuBLAS on an
// 8192^3 product. '*' marks the fastest variant of a size. "down_proj+silu": the down
// projection fed by gate_up [M, 2I]: cuBLAS after kernels::silu_and_mul against the fused
// skinny_gemm_silu_mul. "+pdl": the config launched with programmatic dependent launch; in
// this graph every call follows another such GEMM, which lets it start early, so its prologue
// overlaps the previous call's tail: more overlap than a decode step gives after a kernel
// that does not trigger its dependents early (norm, attention).
//
// Usage: gemm_bench [--launches N] [--model 0.6b|8b|8b-tp4] [--gemm NAME] [--m M]
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/kernel_bench_util.cuh"
#include "kernels/activation.h"
#include "kernels/hopper_gemm.h"
#include "kernels/linear.h"
#include "kernels/skinny_gemm.h"

namespace nanovllm::bench {
namespace {

constexpr int kMinCalls = 20;                       // GEMMs per graph
constexpr size_t kRotateBytes = size_t{256} << 20;  // weight copies in all: beyond any L2
constexpr int64_t kTokens[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

struct Gemm {
  const char* model;
  const char* name;
  int64_t n, k;
  DType out;
  bool silu_mul = false;  // x is gate_up [M, 2K]
};

// Qwen3-0.6B: hidden 1024, 16 q / 8 kv heads of 128, intermediate 3072, vocab 151936.
// Qwen3-8B: hidden 4096, 32 q / 8 kv heads of 128, intermediate 12288; "8b-tp4": its shards.
constexpr Gemm kGemms[] = {
    {"0.6b", "qkv_proj", 4096, 1024, DType::kBf16},
    {"0.6b", "o_proj", 1024, 2048, DType::kBf16},
    {"0.6b", "gate_up_proj", 6144, 1024, DType::kBf16},
    {"0.6b", "down_proj", 1024, 3072, DType::kBf16},
    {"0.6b", "down_proj+silu", 1024, 3072, DType::kBf16, true},
    {"0.6b", "lm_head", 151936, 1024, DType::kF32},
    {"8b", "qkv_proj", 6144, 4096, DType::kBf16},
    {"8b", "o_proj", 4096, 4096, DType::kBf16},
    {"8b", "gate_up_proj", 24576, 4096, DType::kBf16},
    {"8b", "down_proj", 4096, 12288, DType::kBf16},
    {"8b", "down_proj+silu", 4096, 12288, DType::kBf16, true},
    {"8b", "lm_head", 151936, 4096, DType::kF32},
    // One rank's shards at --tp 4 (column-parallel N / 4, row-parallel K / 4; issue 31).
    {"8b-tp4", "qkv_proj", 1536, 4096, DType::kBf16},
    {"8b-tp4", "o_proj", 4096, 1024, DType::kBf16},
    {"8b-tp4", "gate_up_proj", 6144, 4096, DType::kBf16},
    {"8b-tp4", "down_proj", 4096, 3072, DType::kBf16},
};

struct Machine {
  double copy_gbps = 0;
  double peak_tflops = 0;
  int launches = 10;
};

struct Row {
  std::string variant;
  double us = 0;
};

TensorView cuda_view(void* p, DType t, std::initializer_list<int64_t> dims) {
  return TensorView(p, t, dims, Device::kCuda);
}

// Times every variant of one GEMM at one M and prints their rows.
void run(const Gemm& g, int64_t m, const ExecContext& base_ctx, const Machine& mc) {
  const size_t w_bytes = g.n * g.k * 2;
  const WeightCopies ws(g.n, g.k, kRotateBytes);
  const int64_t x_width = g.silu_mul ? 2 * g.k : g.k;
  DeviceBuf x(m * x_width * 2);              // [M, K] or gate_up [M, 2K] bf16
  DeviceBuf act(m * g.k * 2);                // [M, K] bf16: silu_and_mul(gate_up), cuBLAS path
  DeviceBuf y(m * g.n * dtype_size(g.out));  // [M, N]
  x.fill_random_bf16(7);
  const TensorView xv = cuda_view(x.ptr, DType::kBf16, {m, x_width});
  const TensorView actv = cuda_view(act.ptr, DType::kBf16, {m, g.k});
  const TensorView yv = cuda_view(y.ptr, g.out, {m, g.n});
  TensorView none;
  none.device = Device::kCuda;
  const auto weights = [&](int i) { return cuda_view(ws[i], DType::kBf16, {g.n, g.k}); };
  const int calls = std::max(kMinCalls, ws.count());

  std::vector<Row> rows;
  rows.push_back({g.silu_mul ? "silu+cublas" : "cublas",
                  time_graph_us(
                      [&](int i, cudaStream_t s) {
                        ExecContext ctx = base_ctx;
                        ctx.stream = s;
                        ctx.cublas_only = true;  // linear's own choice may be the skinny GEMM
                        if (g.silu_mul) {
                          kernels::cuda::silu_and_mul(actv, xv, s);
                          kernels::cuda::linear(yv, actv, weights(i), none, ctx);
                        } else {
                          kernels::cuda::linear(yv, xv, weights(i), none, ctx);
                        }
                      },
                      calls, mc.launches)});
  std::vector<kernels::SkinnyGemmConfig> configs =
      kernels::skinny_gemm_configs(m, g.n, g.k, g.silu_mul);
  for (size_t i = 0, n = configs.size(); i < n; ++i) {  // each also launched with PDL
    configs.push_back(configs[i]);
    configs.back().pdl = true;
  }
  for (const kernels::SkinnyGemmConfig& cfg : configs)
    rows.push_back({"skinny " + cfg.name(),
                    time_graph_us(
                        [&](int i, cudaStream_t s) {
                          if (g.silu_mul)
                            kernels::cuda::skinny_gemm_silu_mul(yv, xv, weights(i), none, cfg, s);
                          else
                            kernels::cuda::skinny_gemm(yv, xv, weights(i), none, cfg, s);
                        },
                        calls, mc.launches)});
  std::vector<kernels::HopperGemmConfig> hopper_configs;
  if (!g.silu_mul) hopper_configs = kernels::hopper_gemm_configs(m, g.n, g.k);
  for (kernels::HopperGemmConfig& cfg : hopper_configs) cfg.pdl = true;  // as linear launches it
  for (const kernels::HopperGemmConfig& cfg : hopper_configs)
    rows.push_back({"hopper " + cfg.name(), time_graph_us(
                                                [&](int i, cudaStream_t s) {
                                                  kernels::cuda::hopper_gemm(yv, xv, weights(i),
                                                                             none, cfg, s);
                                                },
                                                calls, mc.launches)});
  const bool gate_up = std::strcmp(g.name, "gate_up_proj") == 0;
  DeviceBuf act_out(gate_up ? m * g.n : 2);  // [M, N/2] bf16
  const TensorView act_outv = cuda_view(act_out.ptr, DType::kBf16, {m, g.n / 2});
  std::vector<kernels::HopperGemmConfig> act_configs;
  if (gate_up) act_configs = kernels::hopper_gemm_configs(m, g.n / 2, g.k, true);
  for (kernels::HopperGemmConfig& cfg : act_configs) cfg.pdl = true;
  for (const kernels::HopperGemmConfig& cfg : act_configs)
    rows.push_back({"hopper-act " + cfg.name(), time_graph_us(
                                                    [&](int i, cudaStream_t s) {
                                                      kernels::cuda::hopper_gemm_gate_up_act(
                                                          act_outv, xv, weights(i), cfg, s);
                                                    },
                                                    calls, mc.launches)});

  const double flops = 2.0 * m * g.n * g.k;
  const double bytes = static_cast<double>(m * x_width * 2 + w_bytes + m * g.n * dtype_size(g.out));
  const double limit_us =
      std::max(bytes / (mc.copy_gbps * 1e9), flops / (mc.peak_tflops * 1e12)) * 1e6;
  size_t best = 0;
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i].us < rows[best].us) best = i;
  char shape[96];
  std::snprintf(shape, sizeof(shape), "%s %s M=%lld N=%lld K=%lld", g.model, g.name,
                static_cast<long long>(m), static_cast<long long>(g.n),
                static_cast<long long>(g.k));
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double gbps = bytes / (r.us * 1e-6) / 1e9, tflops = flops / (r.us * 1e-6) / 1e12;
    std::printf("%-40s %-18s %9.2f %8.0f %7.2f %7.2f %s\n", shape, r.variant.c_str(), r.us, gbps,
                gbps / mc.copy_gbps, limit_us / r.us, i == best ? "*" : "");
    std::printf(
        "JSON {\"bench\":\"gemm\",\"shape\":\"%s\",\"variant\":\"%s\",\"us\":%.3f,"
        "\"tflops\":%.3f,\"gbps\":%.1f,\"ratio\":%.4f,\"ratio_of\":\"gbps/copy_bw\","
        "\"limit_us\":%.3f,\"limit_ratio\":%.4f,\"fastest\":%s}\n",
        shape, r.variant.c_str(), r.us, tflops, gbps, gbps / mc.copy_gbps, limit_us,
        limit_us / r.us, i == best ? "true" : "false");
  }
  for (const char* family : {"skinny ", "hopper "}) {  // rows[0] is cuBLAS
    size_t best_of = 0;
    for (size_t i = 1; i < rows.size(); ++i)
      if (rows[i].variant.rfind(family, 0) == 0 && (best_of == 0 || rows[i].us < rows[best_of].us))
        best_of = i;
    if (best_of != 0)
      std::printf("%-40s best %s: %.2fx cuBLAS's speed\n", shape, rows[best_of].variant.c_str(),
                  rows[0].us / rows[best_of].us);
  }
  std::fflush(stdout);
}

// bf16 TFLOP/s of cuBLAS on an 8192^3 product of random data: the compute ceiling.
double peak_tflops(const ExecContext& ctx) {
  constexpr int64_t kN = 8192;
  DeviceBuf a(kN * kN * 2), b(kN * kN * 2), c(kN * kN * 2);
  a.fill_random_bf16(1);
  b.fill_random_bf16(2);
  const TensorView none;
  const double ms = time_ms([&](int) {
    kernels::cuda::linear(cuda_view(c.ptr, DType::kBf16, {kN, kN}),
                          cuda_view(a.ptr, DType::kBf16, {kN, kN}),
                          cuda_view(b.ptr, DType::kBf16, {kN, kN}), none, ctx);
  });
  return 2.0 * kN * kN * kN / (ms * 1e-3) / 1e12;
}

}  // namespace
}  // namespace nanovllm::bench

int main(int argc, char** argv) {
  using namespace nanovllm;
  using namespace nanovllm::bench;
  Machine mc;
  const char* model = nullptr;  // filters: null = all
  const char* gemm = nullptr;
  int64_t only_m = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--launches") && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      mc.launches = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--model") && i + 1 < argc) {
      model = argv[++i];
    } else if (!std::strcmp(argv[i], "--gemm") && i + 1 < argc) {
      gemm = argv[++i];
    } else if (!std::strcmp(argv[i], "--m") && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      only_m = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--launches N] [--model 0.6b|8b|8b-tp4] [--gemm NAME] [--m M]\n",
                   argv[0]);
      return 2;
    }
  }
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  DeviceBuf workspace(size_t{32} << 20);  // cuBLAS workspace: no allocation inside a capture
  ExecContext ctx;
  ctx.cublas = h;
  ctx.cublas_workspace = workspace.ptr;
  ctx.cublas_workspace_bytes = workspace.bytes;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  mc.copy_gbps = copy_bandwidth_gbps();
  mc.peak_tflops = peak_tflops(ctx);
  std::printf("device %s, %d SMs; D2D copy %.0f GB/s (read + write); cuBLAS bf16 %.0f TFLOP/s\n",
              prop.name, prop.multiProcessorCount, mc.copy_gbps, mc.peak_tflops);
  std::printf("%-40s %-18s %9s %8s %7s %7s\n", "gemm", "variant", "us", "GB/s", "/copy", "/limit");
  for (const Gemm& g : kGemms) {
    if (model != nullptr && std::strcmp(model, g.model) != 0) continue;
    if (gemm != nullptr && std::strcmp(gemm, g.name) != 0) continue;
    for (int64_t m : kTokens)
      if (only_m == 0 || m == only_m) run(g, m, ctx, mc);
  }
  cublasDestroy(h);
  return 0;
}
