// Where a kernel runs: the CUDA stream and cuBLAS handle for device tensors; ignored by the
// CPU reference. Owned by the model runner, passed by reference to every launcher.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace nanovllm {

class PhaseTimer;  // kernels/phase_timer.h

struct ExecContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  void* cublas_workspace = nullptr;  // device scratch for cuBLASLt, may be null
  size_t cublas_workspace_bytes = 0;
  // CUDA linear layers: cuBLAS for every shape instead of our decode-size kernels where
  // kernels/cuda/linear.cu picks them (a benchmark's baseline).
  bool cublas_only = false;
  int cpu_threads = 1;  // CPU reference: threads for the heavy loops (linear, attention)
  // Ranks of the tensor-parallel group this context's model runs in: the CUDA decode kernels'
  // launch rules that measured differently there read it (kernels/skinny_gemm.h's
  // skinny_next_launch_after_wait).
  int tp_size = 1;
  // Set only for an eager profiling run (never while a CUDA graph is captured): the
  // layers' PhaseScopes time their phases into it. Null: the scopes do nothing.
  PhaseTimer* phase_timer = nullptr;
};

}  // namespace nanovllm
