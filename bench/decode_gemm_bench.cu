// The GEMMs of one whole decode step, captured in one CUDA graph as the decode graphs run
// them: per layer qkv_proj, o_proj, gate_up_proj, down_proj with that layer's own weights
// (so every call reads its weights from HBM, as in the model), then the LM head (f32
// logits). Issue 15's GEMM target is on this sum: at M = 1, 16, 64, 256 the step's GEMM time
// against the step's limit, sum over the GEMMs of max(bytes / copy bandwidth, FLOPs / BF16
// peak), with both ceilings measured on this GPU (bench/machine_limits.h). Each shape is run
// twice: through kernels::cuda::linear as the model calls it (its own choice of kernel per
// shape) and with cuBLAS only (ExecContext::cublas_only), the path before issue 15.
//
// Usage: decode_gemm_bench [--models 0.6b,8b] [--json FILE]
#include <cublas_v2.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/kernel_bench_util.cuh"
#include "bench/machine_limits.h"
#include "kernels/linear.h"

namespace nanovllm::bench {
namespace {

// The Qwen3 shapes of nanovllm-mkmodel's presets (head_dim 128, vocab 151936).
struct ModelShape {
  const char* name;
  int64_t hidden, inter, layers, q_heads, kv_heads;
};
constexpr ModelShape kModels[] = {{"0.6b", 1024, 3072, 28, 16, 8},
                                  {"1.7b", 2048, 6144, 28, 16, 8},
                                  {"4b", 2560, 9728, 36, 32, 8},
                                  {"8b", 4096, 12288, 36, 32, 8}};
constexpr int64_t kHeadDim = 128, kVocab = 151936;

struct Gemm {
  const char* name;
  int64_t n, k;
  DType out;
};

std::vector<Gemm> layer_gemms(const ModelShape& s) {
  const int64_t q = s.q_heads * kHeadDim, kv = s.kv_heads * kHeadDim;
  return {{"qkv_proj", q + 2 * kv, s.hidden, DType::kBf16},
          {"o_proj", s.hidden, q, DType::kBf16},
          {"gate_up_proj", 2 * s.inter, s.hidden, DType::kBf16},
          {"down_proj", s.hidden, s.inter, DType::kBf16}};
}

// Whether the comma-separated list names `name`.
bool listed(const std::string& list, const char* name) {
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    if (list.compare(start, end - start, name) == 0) return true;
    start = end + 1;
  }
  return false;
}

struct Figure {
  double us = 0, limit_us = 0;
};

// One model at one M: the whole step's GEMMs in one graph, median of several launches.
Figure run_step(const ModelShape& s, const std::vector<std::unique_ptr<DeviceBuf>>& weights,
                const DeviceBuf& lm_head, int64_t m, bool cublas_only, ExecContext ctx,
                const MachineLimits& lim) {
  ctx.cublas_only = cublas_only;
  const std::vector<Gemm> gemms = layer_gemms(s);
  int64_t widest = kVocab;
  for (const Gemm& g : gemms) widest = std::max({widest, g.n, g.k});
  DeviceBuf x(m * widest * 2), y(m * widest * 4);
  x.fill_random_bf16(3, 0.5f);
  Figure f;
  auto limit_us = [&](const Gemm& g) {
    const double bytes =
        static_cast<double>(g.n * g.k * 2 + m * g.k * 2 + m * g.n * dtype_size(g.out));
    const double flops = 2.0 * static_cast<double>(m * g.n * g.k);
    return std::max(bytes / lim.copy_bytes_per_s, flops / lim.bf16_flop_per_s) * 1e6;
  };
  TensorView none;
  none.device = Device::kCuda;
  auto step = [&] {
    for (int64_t l = 0; l < s.layers; ++l)
      for (size_t i = 0; i < gemms.size(); ++i) {
        const Gemm& g = gemms[i];
        const TensorView w(weights[l * gemms.size() + i]->ptr, DType::kBf16, {g.n, g.k},
                           Device::kCuda);
        kernels::cuda::linear(TensorView(y.ptr, g.out, {m, g.n}, Device::kCuda),
                              TensorView(x.ptr, DType::kBf16, {m, g.k}, Device::kCuda), w, none,
                              ctx);
      }
    kernels::cuda::linear(TensorView(y.ptr, DType::kF32, {m, kVocab}, Device::kCuda),
                          TensorView(x.ptr, DType::kBf16, {m, s.hidden}, Device::kCuda),
                          TensorView(lm_head.ptr, DType::kBf16, {kVocab, s.hidden}, Device::kCuda),
                          none, ctx);
  };
  for (const Gemm& g : gemms) f.limit_us += s.layers * limit_us(g);
  f.limit_us += limit_us(Gemm{"lm_head", kVocab, s.hidden, DType::kF32});
  step();  // lazy initialisation outside the capture
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  step();
  CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int rep = 0; rep < 12; ++rep) {
    CUDA_CHECK(cudaEventRecord(a, ctx.stream));
    CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
    CUDA_CHECK(cudaEventRecord(b, ctx.stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    if (rep >= 2) ms.push_back(t);  // the first launches upload the graph
  }
  std::sort(ms.begin(), ms.end());
  f.us = ms[ms.size() / 2] * 1e3;
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return f;
}

}  // namespace
}  // namespace nanovllm::bench

int main(int argc, char** argv) {
  using namespace nanovllm;
  using namespace nanovllm::bench;
  std::string models = "0.6b,8b";
  const char* json_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--models") == 0 && i + 1 < argc) {
      models = argv[++i];
    } else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: decode_gemm_bench [--models 0.6b,8b] [--json FILE]\n");
      return 2;
    }
  }
  const MachineLimits lim = measure_machine_limits();
  std::printf("%s: copy %.0f GB/s, bf16 %.0f TFLOP/s\n", lim.device.c_str(),
              lim.copy_bytes_per_s / 1e9, lim.bf16_flop_per_s / 1e12);
  BenchExec exec;
  const ExecContext& ctx = exec.ctx;
  std::FILE* json = json_path ? std::fopen(json_path, "w") : nullptr;
  CHECK_MSG(json_path == nullptr || json != nullptr, "cannot write " << json_path);
  if (json) std::fprintf(json, "[\n");
  bool first = true;
  std::printf("\n%-6s %5s %12s %12s %12s %9s %9s\n", "model", "M", "linear us", "cuBLAS us",
              "limit us", "% limit", "cuBLAS %");
  for (const ModelShape& s : kModels) {
    if (!listed(models, s.name)) continue;
    const std::vector<Gemm> gemms = layer_gemms(s);
    std::vector<std::unique_ptr<DeviceBuf>> weights;  // [layers x 4], each [N, K] bf16
    for (int64_t l = 0; l < s.layers; ++l)
      for (const Gemm& g : gemms) {
        weights.push_back(std::make_unique<DeviceBuf>(g.n * g.k * 2));
        weights.back()->fill_random_bf16(static_cast<uint32_t>(weights.size()), 0.05f);
      }
    DeviceBuf lm_head(kVocab * s.hidden * 2);  // [V, hidden] bf16
    lm_head.fill_random_bf16(99, 0.05f);
    for (const int64_t m : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      const Figure ours = run_step(s, weights, lm_head, m, false, ctx, lim);
      const Figure base = run_step(s, weights, lm_head, m, true, ctx, lim);
      std::printf("%-6s %5ld %12.1f %12.1f %12.1f %8.1f%% %8.1f%%\n", s.name, static_cast<long>(m),
                  ours.us, base.us, ours.limit_us, 100 * ours.limit_us / ours.us,
                  100 * base.limit_us / base.us);
      if (json)
        std::fprintf(json,
                     "%s  {\"model\":\"%s\",\"m\":%ld,\"linear_us\":%.2f,\"cublas_us\":%.2f,"
                     "\"limit_us\":%.2f}",
                     first ? "" : ",\n", s.name, static_cast<long>(m), ours.us, base.us,
                     ours.limit_us);
      first = false;
    }
  }
  if (json) {
    std::fprintf(json, "\n]\n");
    std::fclose(json);
  }
  return 0;
}
