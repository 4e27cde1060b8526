// cuBLAS GEMMs of Qwen3-0.6B (hidden 1024, 16 q / 8 kv heads of 128, intermediate 3072,
// vocab 151936) at decode batch sizes and a prefill size, through kernels::cuda::linear.
// Prints TFLOP/s and the achieved bandwidth (x, w, y each moved once); several weight copies
// are rotated so small-M runs read weights from HBM, not L2.
#include <cublas_v2.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/kernel_bench_util.cuh"
#include "kernels/linear.h"

namespace nanovllm::bench {
namespace {

struct Gemm {
  const char* name;
  int64_t n, k;
  DType out;
};

void run(const Gemm& g, int64_t m, const ExecContext& ctx, double copy_gbps) {
  const size_t w_bytes = g.n * g.k * 2;
  const int copies = static_cast<int>(std::max<size_t>(1, (size_t{256} << 20) / w_bytes + 1));
  std::vector<std::unique_ptr<DeviceBuf>> ws;
  for (int c = 0; c < copies; ++c) {
    ws.push_back(std::make_unique<DeviceBuf>(w_bytes));
    ws.back()->fill_random_bf16(100 + c, 0.05f);
  }
  const size_t y_bytes = m * g.n * dtype_size(g.out);
  DeviceBuf x(m * g.k * 2), y(y_bytes);
  x.fill_random_bf16(7);
  const TensorView xv(x.ptr, DType::kBf16, {m, g.k}, Device::kCuda);
  const TensorView yv(y.ptr, g.out, {m, g.n}, Device::kCuda);
  TensorView none;
  none.device = Device::kCuda;
  const double ms = time_ms([&](int rep) {
    const TensorView wv(ws[rep % copies]->ptr, DType::kBf16, {g.n, g.k}, Device::kCuda);
    kernels::cuda::linear(yv, xv, wv, none, ctx);
  });
  const double flops = 2.0 * m * g.n * g.k;
  const double bytes = static_cast<double>(m * g.k * 2 + w_bytes + y_bytes);
  const std::string shape = std::string(g.name) + " M=" + std::to_string(m) +
                            " N=" + std::to_string(g.n) + " K=" + std::to_string(g.k);
  report("gemm", shape, ms, flops, bytes, bytes / (ms * 1e-3) / 1e9 / copy_gbps, "gbps/copy_bw");
}

}  // namespace
}  // namespace nanovllm::bench

int main() {
  using namespace nanovllm;
  using namespace nanovllm::bench;
  const double copy = copy_bandwidth_gbps();
  std::printf("D2D copy %.0f GB/s (read + write)\n", copy);
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  DeviceBuf workspace(size_t{32} << 20);
  ExecContext ctx;
  ctx.cublas = h;
  ctx.cublas_workspace = workspace.ptr;
  ctx.cublas_workspace_bytes = workspace.bytes;
  const Gemm gemms[] = {{"qkv_proj", 4096, 1024, DType::kBf16},
                        {"o_proj", 1024, 2048, DType::kBf16},
                        {"gate_up_proj", 6144, 1024, DType::kBf16},
                        {"down_proj", 1024, 3072, DType::kBf16},
                        {"lm_head", 151936, 1024, DType::kF32}};
  print_header("cuBLAS GEMMs, Qwen3-0.6B (ratio: GB/s / copy GB/s)");
  for (const Gemm& g : gemms)
    for (int64_t m : {1, 16, 64, 256, 512, 16384}) {
      if (g.out == DType::kF32 && m > 512) continue;  // logits only for sampled rows
      run(g, m, ctx, copy);
    }
  cublasDestroy(h);
  return 0;
}
