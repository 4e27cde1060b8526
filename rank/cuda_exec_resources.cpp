#include "rank/cuda_exec_resources.h"

namespace nanovllm {

CudaExecResources::CudaExecResources() : workspace_(kCublasWorkspaceBytes, Device::kCuda) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  CUBLAS_CHECK(cublasSetWorkspace(cublas_, workspace_.data(), workspace_.nbytes()));
}

CudaExecResources::~CudaExecResources() {
  // No throwing from a destructor; a failure here cannot be acted on.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaExecResources::fill(ExecContext& ctx) const {
  ctx.stream = stream_;
  ctx.cublas = cublas_;
  ctx.cublas_workspace = workspace_.data();
  ctx.cublas_workspace_bytes = workspace_.nbytes();
}

GpuMemInfo gpu_mem_info() {
  GpuMemInfo m;
  CUDA_CHECK(cudaMemGetInfo(&m.free_bytes, &m.total_bytes));
  return m;
}

}  // namespace nanovllm
