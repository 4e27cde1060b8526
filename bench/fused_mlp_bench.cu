// The decode MLP at one token inside a CUDA graph, among the kernels around it in the decode
// step: per layer of the 8B shape's tensor-parallel shard (--tp N: hidden 4096, intermediate
// 12288 / N, q 4096 / N, kv 1024 / N) the input norm, the qkv projection, the output projection
// (the attention itself left out), the post-attention norm (fused_add_rms_norm, standing in for
// the all-reduce's fused sum and norm), then the MLP, each with that layer's own weights (every
// layer reads its weights from HBM), y over x. Two MLP paths: the two GEMMs
// (kernels::cuda::linear_gate_up_act, or gate_up then linear_silu_mul, and the down projection,
// as Qwen3MLP runs them) and the fused kernel (kernels::cuda::fused_mlp_any_rule: the held or
// streamed form its plan takes; "-1" where it takes none). The MLP's time a layer
// is the chain's time less the chain's without it (the neighbours' overlap with it counts, as in
// the step); its limit is its weights' bytes at the copy bandwidth. The fused path's y is checked
// against the GEMMs' (a fast but broken kernel shows).
//
// Usage: fused_mlp_bench [--tp 1,2,4,8] [--layers 36]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/kernel_bench_util.cuh"
#include "bench/machine_limits.h"
#include "kernels/fused_mlp.h"
#include "kernels/linear.h"
#include "kernels/rms_norm.h"

namespace nanovllm::bench {
namespace {

enum class Path { kNoMlp, kGemms, kFused };

// One layer's weights, bf16: qkv [q + 2 kv, H], o [H, q], gate_up [2I, H], down [H, I]; the
// fused MLP's u64 barrier counter.
struct Layer {
  std::unique_ptr<DeviceBuf> qkv, o, gate_up, down, barrier;
};

struct Shard {
  int64_t h, inter, q, kv;
};

TensorView cuda_view(void* p, std::initializer_list<int64_t> shape) {
  return TensorView(p, DType::kBf16, shape, Device::kCuda);
}

// The activations of one token: x and residual [H], norm weight [H], qkv [q + 2 kv], attn [q]
// (the qkv output's first q), gate_up [2I] and act [I] scratch.
struct Activations {
  explicit Activations(const Shard& s)
      : x(s.h * 2),
        residual(s.h * 2),
        norm_w(s.h * 2),
        qkv((s.q + 2 * s.kv) * 2),
        gate_up(s.inter * 4),
        act(s.inter * 2) {
    x.fill_random_bf16(5, 0.5f);
    residual.fill_random_bf16(6, 0.5f);
    norm_w.fill_random_bf16(7, 1.f);
    qkv.fill_random_bf16(8, 0.5f);
  }
  DeviceBuf x, residual, norm_w, qkv, gate_up, act;
};

// The MLP of one layer, y over x; false where the fused kernel refused it.
bool run_mlp(Path path, Layer& l, const Shard& s, Activations& a, const ExecContext& ctx) {
  TensorView none;
  none.device = Device::kCuda;
  const TensorView vx = cuda_view(a.x.ptr, {1, s.h});
  const TensorView w_gu = cuda_view(l.gate_up->ptr, {2 * s.inter, s.h});
  const TensorView w_down = cuda_view(l.down->ptr, {s.h, s.inter});
  const TensorView vact = cuda_view(a.act.ptr, {1, s.inter});
  if (path == Path::kFused)
    return kernels::cuda::fused_mlp_any_rule(vx, vx, w_gu, w_down, vact,
                                             static_cast<uint64_t*>(l.barrier->ptr), nullptr, ctx);
  if (kernels::cuda::linear_gate_up_act(vact, vx, w_gu, none, ctx)) {
    kernels::cuda::linear(vx, vact, w_down, none, ctx);
  } else {
    const TensorView vgu = cuda_view(a.gate_up.ptr, {1, 2 * s.inter});
    kernels::cuda::linear(vgu, vx, w_gu, none, ctx, true);
    kernels::cuda::linear_silu_mul(vx, vgu, vact, w_down, none, ctx);
  }
  return true;
}

// One pass over the layers on ctx's stream; false where the fused kernel refused a layer.
bool run_layers(Path path, std::vector<Layer>& layers, const Shard& s, Activations& a,
                const ExecContext& ctx) {
  TensorView none;
  none.device = Device::kCuda;
  const TensorView vx = cuda_view(a.x.ptr, {1, s.h}), vres = cuda_view(a.residual.ptr, {1, s.h});
  const TensorView vw = cuda_view(a.norm_w.ptr, {s.h});
  for (Layer& l : layers) {
    kernels::cuda::fused_add_rms_norm(vx, vres, vw, 1e-6f, ctx.stream);
    const TensorView vqkv = cuda_view(a.qkv.ptr, {1, s.q + 2 * s.kv});
    kernels::cuda::linear(vqkv, vx, cuda_view(l.qkv->ptr, {s.q + 2 * s.kv, s.h}), none, ctx, true);
    TensorView attn = cuda_view(a.qkv.ptr, {1, s.q});
    attn.stride[0] = s.q + 2 * s.kv;
    kernels::cuda::linear(vx, attn, cuda_view(l.o->ptr, {s.h, s.q}), none, ctx);
    kernels::cuda::fused_add_rms_norm(vx, vres, vw, 1e-6f, ctx.stream);
    if (path != Path::kNoMlp && !run_mlp(path, l, s, a, ctx)) return false;
  }
  return true;
}

// The chain's microseconds a layer in one graph (median of 20 launches); < 0: not taken.
double time_path(Path path, std::vector<Layer>& layers, const Shard& s, const ExecContext& ctx) {
  Activations a(s);
  if (!run_layers(path, layers, s, a, ctx)) return -1;
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  run_layers(path, layers, s, a, ctx);
  CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double us =
      graph_launch_ms(exec, ctx.stream, 20) * 1e3 / static_cast<double>(layers.size());
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  return us;
}

// One MLP from the same x on both paths: max |fused - GEMMs| and max |GEMMs|.
std::pair<float, float> check_mlp(Layer& l, const Shard& s, const ExecContext& ctx) {
  Activations a0(s), a1(s);
  run_mlp(Path::kGemms, l, s, a0, ctx);
  run_mlp(Path::kFused, l, s, a1, ctx);
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return {max_abs_diff_bf16(a1.x, &a0.x), max_abs_diff_bf16(a0.x)};
}

std::unique_ptr<DeviceBuf> random_weight(int64_t rows, int64_t cols, uint32_t seed) {
  auto w = std::make_unique<DeviceBuf>(rows * cols * 2);
  w->fill_random_bf16(seed, 0.05f);
  return w;
}

}  // namespace
}  // namespace nanovllm::bench

int main(int argc, char** argv) {
  using namespace nanovllm;
  using namespace nanovllm::bench;
  std::string tps = "1,2,4,8";
  int n_layers = 36;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tp") == 0 && i + 1 < argc) {
      tps = argv[++i];
    } else if (std::strcmp(argv[i], "--layers") == 0 && i + 1 < argc) {
      n_layers = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: fused_mlp_bench [--tp 1,2,4,8] [--layers N]\n");
      return 2;
    }
  }
  const MachineLimits lim = measure_machine_limits();
  std::printf("%s: copy %.0f GB/s\n", lim.device.c_str(), lim.copy_bytes_per_s / 1e9);
  BenchExec exec;
  ExecContext& ctx = exec.ctx;
  std::printf("\n%-4s %-10s %9s %9s %9s %9s %9s %9s %12s\n", "tp", "H x I", "rest us", "gemms us",
              "fused us", "limit us", "gemms %", "fused %", "max|diff|");
  size_t start = 0;
  while (start < tps.size()) {
    const size_t end = std::min(tps.find(',', start), tps.size());
    const int tp = std::atoi(tps.substr(start, end - start).c_str());
    start = end + 1;
    CHECK_MSG(tp == 1 || tp == 2 || tp == 4 || tp == 8, "--tp takes 1, 2, 4 or 8, got " << tp);
    const Shard s{4096, 12288 / tp, 4096 / tp, 1024 / tp};
    ctx.tp_size = tp;
    std::vector<Layer> layers(n_layers);
    for (int l = 0; l < n_layers; ++l) {
      const uint32_t seed = 100 + 4 * static_cast<uint32_t>(l);
      layers[l].qkv = random_weight(s.q + 2 * s.kv, s.h, seed);
      layers[l].o = random_weight(s.h, s.q, seed + 1);
      layers[l].gate_up = random_weight(2 * s.inter, s.h, seed + 2);
      layers[l].down = random_weight(s.h, s.inter, seed + 3);
      layers[l].barrier = std::make_unique<DeviceBuf>(8);
      CUDA_CHECK(cudaMemset(layers[l].barrier->ptr, 0, 8));
    }
    const double rest = time_path(Path::kNoMlp, layers, s, ctx);
    const double gemms = time_path(Path::kGemms, layers, s, ctx) - rest;
    const double fused_chain = time_path(Path::kFused, layers, s, ctx);
    const double fused = fused_chain < 0 ? -1 : fused_chain - rest;
    const double limit_us =
        3.0 * static_cast<double>(s.h * s.inter) * 2 / lim.copy_bytes_per_s * 1e6;
    std::pair<float, float> diff{0, 0};
    if (fused >= 0) diff = check_mlp(layers[0], s, ctx);
    std::printf("%-4d %4ldx%-5ld %9.2f %9.2f %9.2f %9.2f %8.1f%% %8.1f%% %6.4f/%5.3f\n", tp,
                static_cast<long>(s.h), static_cast<long>(s.inter), rest, gemms, fused, limit_us,
                100 * limit_us / gemms, fused >= 0 ? 100 * limit_us / fused : 0.0, diff.first,
                diff.second);
  }
  return 0;
}
