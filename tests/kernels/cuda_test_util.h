// Helpers for the CUDA-vs-CPU kernel tests: skip without a GPU, device buffers that start
// poisoned (0xFF bytes: bf16/f32 NaN, i32 -1) so unwritten outputs fail, random bf16 data,
// and the error measures every comparison uses.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/check.h"
#include "kernels/tensor.h"
#include "tests/kernels/host_tensors.h"

namespace nanovllm::test {

inline bool cuda_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define SKIP_WITHOUT_CUDA()                                                    \
  do {                                                                         \
    if (!::nanovllm::test::cuda_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

// Waits for this device's legacy default stream, where cudaMemcpy and cudaMemset run. A
// cudaMemset of device memory, and a cudaMemcpy from pageable memory, may return before they
// land (CUDA's API synchronization behavior), and the kernels under test run on non-blocking
// streams, which do not wait for the legacy stream: without this a kernel can read an upload
// before it lands, or a poisoning memset can land on its output afterwards.
inline void finish_legacy_stream() {
  CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

// Owning device allocation, poisoned at birth (complete on return).
class DeviceMem {
 public:
  explicit DeviceMem(size_t bytes) : bytes_(bytes) {
    CUDA_CHECK(cudaMalloc(&ptr_, bytes ? bytes : 1));
    poison();
  }
  ~DeviceMem() { cudaFree(ptr_); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // Every byte 0xFF (a bf16 NaN), complete on return: a kernel's unwritten output shows.
  void poison() const {
    CUDA_CHECK(cudaMemset(ptr_, 0xFF, bytes_ ? bytes_ : 1));
    finish_legacy_stream();
  }

  template <typename T>
  void upload(const std::vector<T>& h) {
    CHECK_LE(h.size() * sizeof(T), bytes_);
    CUDA_CHECK(cudaMemcpy(ptr_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    finish_legacy_stream();
  }
  template <typename T>
  std::vector<T> download(size_t n) const {
    std::vector<T> h(n);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(h.data(), ptr_, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A device copy of a host vector (poisoned first, then filled).
template <typename T>
struct DevVec {
  explicit DevVec(const std::vector<T>& h) : mem(h.size() * sizeof(T)), n(h.size()) {
    mem.upload(h);
  }
  explicit DevVec(size_t count) : mem(count * sizeof(T)), n(count) {}
  TensorView view(DType t, std::initializer_list<int64_t> dims) const {
    return TensorView(mem.get(), t, dims, Device::kCuda);
  }
  std::vector<T> host() const { return mem.template download<T>(n); }
  DeviceMem mem;
  size_t n;
};

struct ErrorStats {
  double rel_l2 = 0;   // ||a - b|| / ||b||
  double max_abs = 0;  // max |a - b|
  bool finite = true;  // no NaN/inf in a (the poison must be gone)
};

inline ErrorStats compare_bf16(const std::vector<uint16_t>& got, const std::vector<uint16_t>& ref) {
  ErrorStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = bf16_to_float(got[i]), b = bf16_to_float(ref[i]);
    if (!std::isfinite(a)) s.finite = false;
    num += (a - b) * (a - b);
    den += b * b;
    s.max_abs = std::max(s.max_abs, std::abs(a - b));
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

inline ErrorStats compare_f32(const std::vector<float>& got, const std::vector<float>& ref) {
  ErrorStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = got[i], b = ref[i];
    if (!std::isfinite(a)) s.finite = false;
    num += (a - b) * (a - b);
    den += b * b;
    s.max_abs = std::max(s.max_abs, std::abs(a - b));
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

inline TensorView host_view(void* p, DType t, std::initializer_list<int64_t> dims) {
  return TensorView(p, t, dims, Device::kCpu);
}

}  // namespace nanovllm::test
