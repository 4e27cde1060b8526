// The two ceilings the benchmark's limit model divides by, measured on the current CUDA
// device: how fast it moves bytes (a large device-to-device copy) and how fast it multiplies
// BF16 matrices (a large cuBLAS GEMM). Measured rather than taken from a data sheet so that
// "% of limit" compares our kernels with what this very GPU, clocks and driver included,
// can do with the vendor's own copy engine and GEMM.
// This header is host-only (no CUDA includes) so host code can hold a MachineLimits.
#pragma once

#include <string>

namespace nanovllm::bench {

struct MachineLimits {
  std::string device;           // cudaDeviceProp::name; empty when not measured
  int sm_count = 0;             // streaming multiprocessors
  double copy_bytes_per_s = 0;  // bytes read + bytes written per second
  double bf16_flop_per_s = 0;   // dense BF16 GEMM, FP32 accumulation (1 FMA = 2 FLOPs)
};

// Measures the current device (cudaGetDevice), about a second of GPU time:
//  - copy: a 1 GiB cudaMemcpyAsync device-to-device, 2 warm-up then best of 10, counting
//    2 GiB moved per copy (the source read and the destination written);
//  - GEMM: C = A·B with M = N = K = 8192 through cublasGemmEx (BF16 A, B and C, FP32
//    compute), on random non-zero data (zeros switch less and run faster than real weights),
//    3 warm-up then best of 10, 2·8192³ FLOPs per call.
// Timed with CUDA events on a private stream. Failures throw nanovllm::CheckError.
MachineLimits measure_machine_limits();

}  // namespace nanovllm::bench
