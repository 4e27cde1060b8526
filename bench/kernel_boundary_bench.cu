// What one dependency between two steps of a decode step costs on this GPU, with no work in
// either step: the floor under a chain of small kernels (a batch-1 decode step is ~230 of them,
// 8 a layer), against the floor under one persistent kernel that separates its steps with a
// grid-wide barrier instead (the megakernel design).
//
//   chain:   N kernels in one CUDA graph, each waiting for the one before it and reading the
//            flag it wrote (an L2 round trip), as our decode kernels read their input; launched
//            plainly or with programmatic dependent launch (PDL, kernels/cuda/common.cuh), with
//            1 block, one block per SM, or four per SM. us per kernel = graph time / N.
//   barrier: one kernel with one block per SM (all resident) crossing N grid-wide barriers (a
//            release arrive, an acquire spin on the count; or with fences around a relaxed
//            arrive), each followed by the same flag read.
//            us per barrier = (time with N barriers - time with none) / N.
// Every read checks the value the step before wrote: a count of mismatches other than zero
// means the chain was not a chain, and the program fails.
//
// kernel_boundary_bench [--steps N]   (default 400)
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/kernel_bench_util.cuh"
#include "kernels/check.h"
#include "kernels/cuda/common.cuh"

namespace nanovllm::bench {
namespace {

namespace kc = kernels::cuda;

// Through L2, in order with the wait (the previous kernel may have run on this SM).
__device__ __forceinline__ int load_flag(const int* p) {
  int v;
  asm volatile("ld.global.cg.s32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Step i of a chain: every block reads flags[i] (step i - 1's write), block 0 writes flags[i+1].
__global__ void chain_step_kernel(int* flags, int i, int* mismatches) {
  kc::wait_for_previous_grid();  // a no-op when launched without PDL
  kc::allow_next_grid();
  if (threadIdx.x != 0) return;
  if (load_flag(flags + i) != i) atomicAdd(mismatches, 1);
  if (blockIdx.x == 0) flags[i + 1] = i + 1;
}

// `steps` steps separated by grid-wide barriers: block 0 writes flags[k], the barrier, then
// every block reads it. count starts at 0; gridDim.x blocks must all be resident. The arrive is
// a release add; kFences: a fence, a relaxed add and a fence after the spin instead (the older
// cooperative-groups form).
template <bool kFences>
__global__ void barrier_steps_kernel(unsigned* count, int* flags, int steps, int* mismatches) {
  for (int k = 0; k < steps; ++k) {
    if (blockIdx.x == 0 && threadIdx.x == 0) flags[k] = k + 1;
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned target = (k + 1u) * gridDim.x;
      if (kFences) {
        __threadfence();
        atomicAdd(count, 1u);
      } else {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(count) : "memory");
      }
      unsigned seen;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(seen) : "l"(count) : "memory");
      } while (seen < target);
      if (kFences) __threadfence();
      if (load_flag(flags + k) != k + 1) atomicAdd(mismatches, 1);
    }
    __syncthreads();
  }
}

struct Buffers {
  explicit Buffers(int steps) : flags(sizeof(int) * (steps + 2)), words(2 * sizeof(int)) {
    CUDA_CHECK(cudaMemset(flags.ptr, 0, flags.bytes));
    CUDA_CHECK(cudaMemset(words.ptr, 0, words.bytes));
  }
  int* mismatches() const { return words.as<int>(); }
  unsigned* count() const { return reinterpret_cast<unsigned*>(words.as<int>() + 1); }
  int read_mismatches() const {
    int v = 0;
    CUDA_CHECK(cudaMemcpy(&v, mismatches(), sizeof v, cudaMemcpyDeviceToHost));
    return v;
  }
  DeviceBuf flags, words;
};

void row(const std::string& what, int blocks, double us, double per_layer_us) {
  std::printf("%-34s %8d %12.2f %16.1f\n", what.c_str(), blocks, us, per_layer_us);
  std::printf("JSON {\"bench\":\"%s\",\"blocks\":%d,\"us_per_step\":%.3f}\n", what.c_str(), blocks,
              us);
}

// us per step of a graph of `steps` chained kernels of `blocks` blocks.
double time_chain(int steps, int blocks, bool pdl, int* bad) {
  Buffers buf(steps);
  const double us = time_graph_us(
      [&](int i, cudaStream_t stream) {
        // Every launch of the graph starts from zeros, so a step that ran early would see one.
        if (i == 0) CUDA_CHECK(cudaMemsetAsync(buf.flags.ptr, 0, buf.flags.bytes, stream));
        if (pdl) {
          kc::launch_dependent(chain_step_kernel, dim3(blocks), dim3(128), stream,
                               buf.flags.as<int>(), i, buf.mismatches());
        } else {
          chain_step_kernel<<<blocks, 128, 0, stream>>>(buf.flags.as<int>(), i, buf.mismatches());
          CUDA_CHECK_LAUNCH();
        }
      },
      steps, 10);
  *bad += buf.read_mismatches();
  return us;
}

// us per grid-wide barrier with one block per SM.
template <bool kFences>
double time_barriers(int steps, int sms, int* bad) {
  Buffers buf(steps);
  const auto run = [&](int n) {
    return time_ms([&](int) {
      CUDA_CHECK(cudaMemsetAsync(buf.count(), 0, sizeof(unsigned)));
      CUDA_CHECK(cudaMemsetAsync(buf.flags.ptr, 0, buf.flags.bytes));
      barrier_steps_kernel<kFences>
          <<<sms, 128>>>(buf.count(), buf.flags.as<int>(), n, buf.mismatches());
      CUDA_CHECK_LAUNCH();
    });
  };
  const double none = run(0), full = run(steps);
  *bad += buf.read_mismatches();
  return (full - none) * 1e3 / steps;
}

}  // namespace
}  // namespace nanovllm::bench

int main(int argc, char** argv) {
  using namespace nanovllm::bench;
  int steps = 400;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: kernel_boundary_bench [--steps N]\n");
      return 2;
    }
  }
  if (steps < 1) {
    std::fprintf(stderr, "kernel_boundary_bench: --steps must be >= 1 (got %d)\n", steps);
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("kernel_boundary_bench: no CUDA device, nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf(
      "device %s, %d SMs; %d steps per measurement; per layer = x 8 (a decode layer's "
      "kernels at batch 1)\n\n%-34s %8s %12s %16s\n",
      prop.name, sms, steps, "step separated by", "blocks", "us/step", "us per layer");
  int bad = 0;
  for (const bool pdl : {false, true})
    for (const int blocks : {1, sms, 4 * sms}) {
      const double us = time_chain(steps, blocks, pdl, &bad);
      row(pdl ? "kernel boundary, PDL" : "kernel boundary, plain launch", blocks, us, 8 * us);
    }
  const double us = time_barriers<false>(steps, sms, &bad);
  row("grid barrier in one kernel", sms, us, 8 * us);
  const double fenced = time_barriers<true>(steps, sms, &bad);
  row("grid barrier, fences", sms, fenced, 8 * fenced);
  if (bad != 0) {
    std::fprintf(stderr, "kernel_boundary_bench: %d reads saw another step's flag\n", bad);
    return 1;
  }
  return 0;
}
