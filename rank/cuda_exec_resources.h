// The CUDA half of a runner's ExecContext: one non-blocking stream (graph capture needs a
// stream other than the legacy default one), one cuBLAS handle bound to it, and a fixed
// cuBLAS workspace (set explicitly so cuBLAS never allocates inside a captured graph).
#pragma once

#include <cstddef>

#include "kernels/device_buffer.h"
#include "kernels/exec_context.h"

namespace nanovllm {

class CudaExecResources {
 public:
  // 32 MiB: what cuBLAS asks for on Hopper (4 MiB elsewhere); larger does not hurt.
  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

  CudaExecResources();  // on the current device
  ~CudaExecResources();
  CudaExecResources(const CudaExecResources&) = delete;
  CudaExecResources& operator=(const CudaExecResources&) = delete;

  // Points ctx's stream, cuBLAS handle and workspace at ours.
  void fill(ExecContext& ctx) const;

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer workspace_;  // [kCublasWorkspaceBytes] u8
};

// cudaMemGetInfo: {free, total} bytes of the current device.
struct GpuMemInfo {
  size_t free_bytes = 0, total_bytes = 0;
};
GpuMemInfo gpu_mem_info();

}  // namespace nanovllm
