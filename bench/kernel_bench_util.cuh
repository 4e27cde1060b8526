// Shared pieces of the kernel micro-benchmarks: device buffers filled with hashed pseudo-random
// bf16 (never zeros: zeros run faster than real data), event timing with warm-up and median,
// the device-to-device copy bandwidth of this GPU (bytes read + written) as the memory
// ceiling, and one output line per result in a table and as JSON.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/check.h"

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

// One result: a table row, then the same as a JSON line (prefix "JSON ") for tools.
inline void report(const std::string& bench, const std::string& shape, double ms, double flops,
                   double bytes, double ratio, const char* ratio_of) {
  const double us = ms * 1e3, tflops = flops / (ms * 1e-3) / 1e12, gbps = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-22s %-44s %10.1f %10.1f %10.0f %8.2f\n", bench.c_str(), shape.c_str(), us, tflops,
              gbps, ratio);
  std::printf(
      "JSON {\"bench\":\"%s\",\"shape\":\"%s\",\"us\":%.2f,\"tflops\":%.3f,\"gbps\":%.1f,"
      "\"ratio\":%.4f,\"ratio_of\":\"%s\"}\n",
      bench.c_str(), shape.c_str(), us, tflops, gbps, ratio, ratio_of);
}

}  // namespace nanovllm::bench
