// Shared pieces of the kernel micro-benchmarks: device buffers filled with hashed pseudo-random
// bf16 (never zeros: zeros run faster than real data), event timing with warm-up and median
// (eager calls, or a CUDA graph of many calls: time_graph_us),
// the device-to-device copy bandwidth of this GPU (bytes read + written) as the memory
// ceiling, the max |difference| of two bf16 outputs (a fast but broken kernel shows), and one
// output line per result in a table and as JSON.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/check.h"
#include "kernels/exec_context.h"

namespace nanovllm::bench {

__global__ void fill_random_bf16_kernel(__nv_bfloat16* p, int64_t n, uint32_t seed, float amp) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffffff) / 16777216.f * 2.f - 1.f) * amp);
  }
}

struct DeviceBuf {
  explicit DeviceBuf(size_t bytes) : bytes(bytes) {
    CUDA_CHECK(cudaMalloc(&ptr, bytes ? bytes : 1));
  }
  ~DeviceBuf() { cudaFree(ptr); }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  void fill_random_bf16(uint32_t seed, float amp = 1.f) {
    fill_random_bf16_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(ptr),
                                           static_cast<int64_t>(bytes / 2), seed, amp);
    CUDA_CHECK_LAUNCH();
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
  void* ptr = nullptr;
  size_t bytes = 0;
};

// What the benchmarks that call the model's launchers run them on: a cuBLAS handle with its
// workspace (no allocation inside a capture: 32 MiB, as the runner gives it) and a non-blocking
// stream, in an ExecContext; released at scope exit.
struct BenchExec {
  BenchExec() : workspace(size_t{32} << 20) {
    CUBLAS_CHECK(cublasCreate(&cublas));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ctx.stream = stream;
    ctx.cublas = cublas;
    ctx.cublas_workspace = workspace.ptr;
    ctx.cublas_workspace_bytes = workspace.bytes;
  }
  ~BenchExec() {
    cublasDestroy(cublas);
    cudaStreamDestroy(stream);
  }
  BenchExec(const BenchExec&) = delete;
  BenchExec& operator=(const BenchExec&) = delete;
  cublasHandle_t cublas = nullptr;
  DeviceBuf workspace;
  cudaStream_t stream = nullptr;
  ExecContext ctx;
};

// max |a[i] - b[i]| over n bf16 values (b null: max |a[i]|) into *max_bits, the bits of a
// non-negative float (their unsigned order is the float order, so atomicMax works on them).
// NaN counts as +inf so that it cannot hide behind fmaxf.
__global__ void max_abs_diff_bf16_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, int64_t n,
                                         unsigned* max_bits) {
  float m = 0.f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float d = fabsf(__bfloat162float(a[i]) - (b ? __bfloat162float(b[i]) : 0.f));
    if (d != d) d = INFINITY;
    m = fmaxf(m, d);
  }
  for (int lane_mask = 16; lane_mask > 0; lane_mask >>= 1)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, lane_mask));
  if (threadIdx.x % 32 == 0) atomicMax(max_bits, __float_as_uint(m));
}

// max |a - b| over two equal bf16 buffers (b null: max |a|), read back to the host.
inline float max_abs_diff_bf16(const DeviceBuf& a, const DeviceBuf* b = nullptr) {
  CHECK(b == nullptr || b->bytes == a.bytes);
  DeviceBuf max_bits(4);  // [1] u32: the float bits of the running max
  CUDA_CHECK(cudaMemset(max_bits.ptr, 0, 4));
  max_abs_diff_bf16_kernel<<<1024, 256>>>(
      a.as<__nv_bfloat16>(), b ? b->as<__nv_bfloat16>() : nullptr,
      static_cast<int64_t>(a.bytes / 2), max_bits.as<unsigned>());
  CUDA_CHECK_LAUNCH();
  unsigned bits = 0;
  CUDA_CHECK(cudaMemcpy(&bits, max_bits.ptr, 4, cudaMemcpyDeviceToHost));
  float m = 0;
  std::memcpy(&m, &bits, 4);
  return m;
}

// Copies of one [N, K] bf16 weight, filled with different random data, `total_bytes` or more
// in all (beyond any L2): calls that take copy i % count() in turn each read their weight from
// HBM, as a decode step's layers do.
struct WeightCopies {
  WeightCopies(int64_t n, int64_t k, size_t total_bytes) {
    const size_t bytes = static_cast<size_t>(n * k) * 2;
    const size_t count = std::max<size_t>(1, total_bytes / bytes + 1);
    for (size_t c = 0; c < count; ++c) {
      copies.push_back(std::make_unique<DeviceBuf>(bytes));
      copies.back()->fill_random_bf16(100 + static_cast<uint32_t>(c), 0.05f);
    }
  }
  int count() const { return static_cast<int>(copies.size()); }
  void* operator[](int i) const { return copies[i % count()]->ptr; }
  std::vector<std::unique_ptr<DeviceBuf>> copies;
};

// Median milliseconds of `reps` timed calls of fn(rep) after `warmup` untimed ones.
inline double time_ms(const std::function<void(int)>& fn, int warmup = 3, int reps = 20) {
  for (int i = 0; i < warmup; ++i) fn(i);
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventRecord(a));
    fn(i);
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median milliseconds of `launches` launches of an instantiated graph on stream, after one
// untimed launch.
inline double graph_launch_ms(cudaGraphExec_t exec, cudaStream_t stream, int launches) {
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = -1; r < launches; ++r) {  // r = -1: warm-up
    CUDA_CHECK(cudaEventRecord(a, stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    if (r >= 0) ms.push_back(t);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Median microseconds per call of fn(i, stream), i in [0, calls), captured into one CUDA graph
// and launched `launches` times (after one untimed launch): what a call costs inside a graph,
// without host launch gaps. fn(0, stream) first runs once eagerly, so one-time set-up (module
// load, attribute setting, handle workspaces) stays out of the capture. Calls may differ by i
// (e.g. rotate weight copies so every call reads HBM).
inline double time_graph_us(const std::function<void(int, cudaStream_t)>& fn, int calls = 20,
                            int launches = 10) {
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fn(0, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) fn(i, stream);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms = graph_launch_ms(exec, stream, launches);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return ms * 1e3 / calls;
}

// Bytes read + written per second by a 2 GiB device-to-device copy.
inline double copy_bandwidth_gbps() {
  const size_t bytes = size_t{2} << 30;
  DeviceBuf src(bytes), dst(bytes);
  src.fill_random_bf16(1);
  const double ms = time_ms(
      [&](int) { CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src.ptr, bytes, cudaMemcpyDeviceToDevice)); });
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

inline void print_header(const char* title) {
  std::printf("\n%s\n%-22s %-44s %10s %10s %10s %8s\n", title, "bench", "shape", "us", "TFLOP/s",
              "GB/s", "ratio");
}

// One result: a table row, then the same as a JSON line (prefix "JSON ") for tools. `extra`
// figures (e.g. a speed-up over another kernel) follow the ratio as name=value in the row and
// as fields of the JSON line.
inline void report(const std::string& bench, const std::string& shape, double ms, double flops,
                   double bytes, double ratio, const char* ratio_of,
                   const std::vector<std::pair<std::string, double>>& extra = {}) {
  const double us = ms * 1e3, tflops = flops / (ms * 1e-3) / 1e12, gbps = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-22s %-44s %10.1f %10.1f %10.0f %8.2f", bench.c_str(), shape.c_str(), us, tflops,
              gbps, ratio);
  for (const auto& [name, value] : extra) std::printf("  %s=%.3f", name.c_str(), value);
  std::printf(
      "\nJSON {\"bench\":\"%s\",\"shape\":\"%s\",\"us\":%.2f,\"tflops\":%.3f,\"gbps\":%.1f,"
      "\"ratio\":%.4f,\"ratio_of\":\"%s\"",
      bench.c_str(), shape.c_str(), us, tflops, gbps, ratio, ratio_of);
  for (const auto& [name, value] : extra) std::printf(",\"%s\":%.4f", name.c_str(), value);
  std::printf("}\n");
}

}  // namespace nanovllm::bench
