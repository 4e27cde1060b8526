// The device side of kernels/kernel_trace.h: the stamps a traced kernel makes, as macros that are
// empty unless the build defines NANOVLLM_KERNEL_TRACE (so the default kernels are unchanged).
//   NANOVLLM_TRACE_SCOPE(tag, key): at the top of a kernel; notes its start and, when the
//     kernel's scope closes, writes the block's record (thread 0 of each block).
//   NANOVLLM_TRACE_WAITED(): right after griddepcontrol.wait (common.cuh's
//     wait_for_previous_grid does it for every kernel that calls it).
#pragma once

#include <cstdint>

#ifdef NANOVLLM_KERNEL_TRACE
#include <cuda_runtime_api.h>

#include "kernels/kernel_trace.h"
#endif

namespace nanovllm::kernels::cuda::trace {

// Which kernel a stamp is from (the report's names: scripts/kernel_trace_report.py).
enum Tag : uint32_t {
  kSkinnyGemm = 1,
  kRmsNorm = 2,
  kQkNormRope = 3,
  kDecodeCluster = 4,
  kDecodeSplit = 5,
  kDecodeMerge = 6,
  kDecodeWhole = 7,
  kSiluMul = 8,
  kPeerAllReduce = 9,
  kPeerAllReduceNorm = 10,
  kSampler = 11,
  kTokenState = 12,
  kEmbedding = 13,
  kProcessLogits = 14,
  kHopperGemm = 15,
  kFusedMlp = 16,
};

#ifdef NANOVLLM_KERNEL_TRACE
// One copy per translation unit (no relocatable device code): each attaches itself below.
static __constant__ KernelTraceBuffers g_buffers;

// Thread 0 of each block: the record's index is taken at the start (an atomic whose return is
// used only at the end), the wait's time goes to a slot of this warp's place on the SM (a plain
// store), and the end writes the block's one record. What it costs: registers (the skinny GEMM
// runs at its 64-register cap) and a read of g_buffers at each block's start and end; a 0.6B
// batch-1 step took 1.13x the default build's time, 1.16x when the stamp held the buffers,
// start, index and SM across the kernel
// (bench/results/h200-2026-11-28-issue33_kernel_timeline.txt).
__device__ __forceinline__ uint32_t sm_id() {
  uint32_t v;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(v));
  return v;
}
__device__ __forceinline__ uint32_t warp_slot() {
  uint32_t v;
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(v));
  return v;
}
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t v;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
  return v;
}
__device__ __forceinline__ uint64_t* wait_slot(const KernelTraceBuffers& b) {
  return b.wait_ns + sm_id() * kKernelTraceWarpSlots + warp_slot();
}

__device__ __forceinline__ void stamp_wait() {
  if (threadIdx.x + threadIdx.y + threadIdx.z != 0) return;
  const KernelTraceBuffers b = g_buffers;
  if (b.records != nullptr) *wait_slot(b) = now_ns();
}

// Holds as few registers as it can across the kernel (the skinny GEMM runs at its 64-register
// cap): the start time and the record's index; the buffers are read again at the end, the key
// comes from the kernel's parameters and the SM from %smid.
struct Scope {
  uint64_t start = 0;
  uint32_t index = 0xffffffffu;  // none: not thread 0, or tracing off
  uint32_t tag;
  const void* key;
  __device__ Scope(uint32_t t, const void* k) : tag(t), key(k) {
    if (threadIdx.x + threadIdx.y + threadIdx.z != 0) return;
    const KernelTraceBuffers b = g_buffers;
    if (b.records == nullptr) return;
    start = now_ns();
    *wait_slot(b) = 0;
    index = atomicAdd(b.counts + sm_id(), 1u);
  }
  __device__ ~Scope() {
    if (index == 0xffffffffu) return;
    const uint64_t end = now_ns();
    const KernelTraceBuffers b = g_buffers;
    if (index >= b.per_sm) return;
    const uint32_t sm = sm_id();
    KernelTraceRecord& r = b.records[static_cast<size_t>(sm) * b.per_sm + index];
    r.start_ns = start;
    r.key = reinterpret_cast<uint64_t>(key);
    r.wait_ns = *wait_slot(b);
    r.end_ns = end;
    r.tag = tag;
    r.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    r.sm = sm;
    r.grid = gridDim.x * gridDim.y * gridDim.z;
  }
};

static void attach_module(const KernelTraceBuffers& b) {
  cudaMemcpyToSymbol(g_buffers, &b, sizeof(b));
}
[[maybe_unused]] static const bool g_registered = register_kernel_trace_module(&attach_module);

#define NANOVLLM_TRACE_SCOPE(tag, key) \
  ::nanovllm::kernels::cuda::trace::Scope nanovllm_trace_scope_((tag), (key))
#define NANOVLLM_TRACE_WAITED() ::nanovllm::kernels::cuda::trace::stamp_wait()
#else
#define NANOVLLM_TRACE_SCOPE(tag, key) ((void)0)
#define NANOVLLM_TRACE_WAITED() ((void)0)
#endif

}  // namespace nanovllm::kernels::cuda::trace
