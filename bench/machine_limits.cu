// Measures the copy bandwidth and the dense BF16 GEMM rate of the current device; what is
// measured and why is in machine_limits.h.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>

#include "bench/machine_limits.h"
#include "kernels/check.h"

namespace nanovllm::bench {
namespace {

constexpr size_t kCopyBytes = size_t{1} << 30;  // per copy; 2 GiB moved (read + written)
constexpr int64_t kGemmDim = 8192;              // M = N = K
constexpr int kReps = 10;

// Uniform in [-amp, amp) from a hash of the index: cheap, reproducible and never all zeros.
__global__ void fill_random_bf16(__nv_bfloat16* p, int64_t n, uint32_t seed, float amp) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ static_cast<uint32_t>(i >> 32) ^ seed;
    h = (h ^ (h >> 16)) * 0x85EBCA6Bu;
    h = (h ^ (h >> 13)) * 0xC2B2AE35u;
    h ^= h >> 16;
    const float unit = static_cast<float>(h >> 8) * (1.f / 16777216.f);  // [0, 1)
    p[i] = __float2bfloat16((2.f * unit - 1.f) * amp);
  }
}

// A device allocation that frees itself; sized in bytes, read as bf16 elements.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) : bytes_(bytes) { CUDA_CHECK(cudaMalloc(&ptr_, bytes)); }
  ~DeviceBytes() { cudaFree(ptr_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;

  void* get() const { return ptr_; }
  __nv_bfloat16* bf16() const { return static_cast<__nv_bfloat16*>(ptr_); }
  void fill_random(uint32_t seed, float amp, cudaStream_t stream) {
    fill_random_bf16<<<1024, 256, 0, stream>>>(bf16(), static_cast<int64_t>(bytes_ / 2), seed, amp);
    CUDA_CHECK_LAUNCH();
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// The fastest of `reps` event-timed calls of fn() on `stream`, after `warmup` untimed ones,
// in seconds. Best, not median: a ceiling is what the hardware can do, not what it usually
// does while the clocks settle.
double best_seconds(const std::function<void()>& fn, cudaStream_t stream, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  float best_ms = std::numeric_limits<float>::max();
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventRecord(start, stream));
    fn();
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best_ms = std::min(best_ms, ms);
  }
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
  return best_ms * 1e-3;
}

double copy_bytes_per_s(cudaStream_t stream) {
  DeviceBytes src(kCopyBytes), dst(kCopyBytes);  // [kCopyBytes / 2] bf16 each
  src.fill_random(1, 1.f, stream);
  const double s = best_seconds(
      [&] {
        CUDA_CHECK(
            cudaMemcpyAsync(dst.get(), src.get(), kCopyBytes, cudaMemcpyDeviceToDevice, stream));
      },
      stream, 2, kReps);
  return 2.0 * static_cast<double>(kCopyBytes) / s;
}

double bf16_flop_per_s(cudaStream_t stream) {
  const int n = static_cast<int>(kGemmDim);
  const size_t matrix_bytes = static_cast<size_t>(kGemmDim * kGemmDim) * sizeof(__nv_bfloat16);
  DeviceBytes a(matrix_bytes), b(matrix_bytes), c(matrix_bytes);  // [8192, 8192] bf16 each
  // Small amplitudes keep the 8192-term sums well inside bf16's range.
  a.fill_random(11, 0.05f, stream);
  b.fill_random(12, 0.05f, stream);
  cublasHandle_t handle;
  CUBLAS_CHECK(cublasCreate(&handle));
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  const float alpha = 1.f, beta = 0.f;
  const double s = best_seconds(
      [&] {
        CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(),
                                  CUDA_R_16BF, n, b.get(), CUDA_R_16BF, n, &beta, c.get(),
                                  CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      },
      stream, 3, kReps);
  CUBLAS_CHECK(cublasDestroy(handle));
  return 2.0 * static_cast<double>(kGemmDim) * kGemmDim * kGemmDim / s;
}

}  // namespace

MachineLimits measure_machine_limits() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  MachineLimits limits;
  limits.device = prop.name;
  limits.sm_count = prop.multiProcessorCount;
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  limits.copy_bytes_per_s = copy_bytes_per_s(stream);
  limits.bf16_flop_per_s = bf16_flop_per_s(stream);
  CUDA_CHECK(cudaStreamDestroy(stream));
  return limits;
}

}  // namespace nanovllm::bench
