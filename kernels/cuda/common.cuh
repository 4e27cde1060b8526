// Small helpers shared by the CUDA kernels: bf16 <-> f32, 16-byte vector access, and the
// host-side argument checks every launcher runs before touching device memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

#include "kernels/check.h"
#include "kernels/cuda/kernel_trace.cuh"
#include "kernels/tensor.h"

namespace nanovllm::kernels::cuda {

using bf16 = __nv_bfloat16;

// Calls of at least this many token rows are a prefill step's: the decode graphs hold at most
// max_num_seqs rows (512 by default). Kernels whose best shape for thousands of rows differs
// from a decode step's (rms_norm.cu, rotary.cu) switch here, with the same bits either way.
constexpr int64_t kPrefillSizedRows = 1024;

// 8 bf16 values = one 16-byte access.
struct alignas(16) Bf16x8 {
  bf16 v[8];
};

__device__ __forceinline__ float to_f32(bf16 x) {
  return __bfloat162float(x);
}
__device__ __forceinline__ bf16 to_bf16(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ Bf16x8 load8(const bf16* p) {
  return *reinterpret_cast<const Bf16x8*>(p);
}
__device__ __forceinline__ void store8(bf16* p, const Bf16x8& v) {
  *reinterpret_cast<Bf16x8*>(p) = v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block whose size is a multiple of 32 (at most 1024); every thread gets it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int nwarps = blockDim.x >> 5;
  v = lane < nwarps ? partial[lane] : 0.f;
  return warp_sum(v);
}

inline void check_cuda_tensor(const TensorView& t, DType dtype, const char* name) {
  CHECK_MSG(t.data != nullptr, name << " is null");
  CHECK_MSG(t.device == Device::kCuda, name << " is not a CUDA tensor");
  CHECK_MSG(t.dtype == dtype,
            name << " has dtype " << dtype_name(t.dtype) << ", expected " << dtype_name(dtype));
  CHECK_MSG(t.stride[t.ndim - 1] == 1, name << " last dim is not contiguous");
}

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

inline int ceil_div(int64_t a, int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}

// Programmatic dependent launch (sm_90). A kernel started by launch_dependent may be launched
// while the previous kernel on the stream is still running, so its CTAs are resident and
// waiting when that kernel ends (no launch gap between the two; in a decode graph of ~250
// small kernels the gaps are a large part of a batch-1 step). Such a kernel calls
// wait_for_previous_grid() before it touches memory (it returns once the previous kernel has
// completed and its writes are visible, so what follows is ordered as a plain launch would
// order it), then allow_next_grid() so the kernel after it may be launched early in turn.
// A kernel may allow before its wait where the kernel after it reads only constants before
// its own wait (RMSNorm, followed by a projection that streams its weights early): the wait
// is still transitive, since no kernel completes before its own wait has returned. The q / k
// norm + rotary kernel allows first too: the decode attention after it reads only earlier
// kernels' and steps' writes ahead of its wait (decode_attention_tile.cuh's wait_once).
// What the previous kernel wrote must not be read through the non-coherent path (__ldg,
// ld.global.nc): that kernel may have been running on the same SM after ours started, and the
// gpu_generation preemption check caught exactly that (load16_l2 below is the load to use).
__device__ __forceinline__ void wait_for_previous_grid() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  NANOVLLM_TRACE_WAITED();
}
__device__ __forceinline__ void allow_next_grid() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// 16 bytes of weights (constants), read once per call: the non-coherent path, skipping L1.
// kOrdered: volatile, so that the compiler keeps the load where it is written (a request made
// before griddepcontrol.wait stays there); otherwise it may schedule it as it likes.
template <bool kOrdered = false>
__device__ __forceinline__ uint4 load_weights16(const bf16* p) {
  uint4 v;
  if constexpr (kOrdered)
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
  else
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
  return v;
}

// 16 bytes another kernel (or another block, after a grid barrier) wrote: under programmatic
// dependent launch that kernel may still have been running on this SM when ours started, so
// neither the non-coherent path (__ldg) nor L1 may serve it, and the load must stay after
// griddepcontrol.wait or the barrier (volatile with a memory clobber: the compiler keeps it in
// order with their asm; a plain __ldg / __ldcg may be hoisted above them). L2 (.cg) is where
// the writes are.
__device__ __forceinline__ uint4 load16_l2(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                      Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// The launch of `grid` with `smem` bytes of dynamic shared memory, in clusters of `cluster_x`
// blocks along x (no cluster attribute where cluster_x is 0), launched early (programmatic
// dependent launch, as launch_dependent) where `early`; the config points at `attrs`, which must
// outlive the launch (cudaLaunchKernelEx, or cudaOccupancyMaxActiveClusters with a null stream).
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem, unsigned cluster_x,
                                        bool early, cudaStream_t stream,
                                        cudaLaunchAttribute (&attrs)[2]) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  unsigned n = 0;
  if (cluster_x > 0) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster_x;
    attrs[n].val.clusterDim.y = 1;
    attrs[n].val.clusterDim.z = 1;
    ++n;
  }
  if (early) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  config.attrs = attrs;
  config.numAttrs = n;
  return config;
}

// launch_config of a cluster kernel: clusters of `cluster_x` blocks, no dynamic shared memory.
inline cudaLaunchConfig_t cluster_launch_config(dim3 grid, dim3 block, unsigned cluster_x,
                                                bool early, cudaStream_t stream,
                                                cudaLaunchAttribute (&attrs)[2]) {
  return launch_config(grid, block, 0, cluster_x, early, stream, attrs);
}

// launch_config of a GEMM that splits K over clusters of `split` blocks along x (the skinny and
// Hopper decode GEMMs): a cluster attribute only where split > 1 (a plain launch otherwise).
inline cudaLaunchConfig_t split_k_launch_config(dim3 grid, dim3 block, size_t smem, unsigned split,
                                                bool early, cudaStream_t stream,
                                                cudaLaunchAttribute (&attrs)[2]) {
  return launch_config(grid, block, smem, split > 1 ? split : 0, early, stream, attrs);
}

// launch_dependent where `early`, else a plain launch (for kernels that wait first, whose early
// launch pays only before some kernels: the caller knows which).
template <typename... Params, typename... Args>
void launch_early_or_plain(bool early, void (*kernel)(Params...), dim3 grid, dim3 block,
                           cudaStream_t stream, Args&&... args) {
  if (early) {
    launch_dependent(kernel, grid, block, stream, std::forward<Args>(args)...);
    return;
  }
  kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
  CUDA_CHECK_LAUNCH();
}

// The GPU's global nanosecond clock (%globaltimer): the bound on a spin wait, so that a wait
// for a block or rank that never comes becomes a trap with a message instead of a hang.
__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// 2^x on the special-function unit (ex2.approx.ftz: ~2 ulp; 2^-inf = +0, which the online
// softmax relies on for masked scores).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace nanovllm::kernels::cuda
