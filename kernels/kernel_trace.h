// A timeline of our kernels inside the decode graphs, for the benchmark's question "where does a
// small-batch step spend its time" (issue 33): every block of a traced kernel stamps the global
// timer when it starts, when its wait for the previous kernel returns (programmatic dependent
// launch) and when it ends, so a replayed graph shows each node's start, wait and end, which
// neither per-kernel profiles (kernels alone) nor knock-outs (a node's cost, not its parts) give.
// Compiled in only with the CMake option NANOVLLM_KERNEL_TRACE (a build apart: the stamps slow
// the step, kernels/cuda/kernel_trace.cuh says how much); the default build has none of it.
// scripts/kernel_trace_report.py reads the dumps.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace nanovllm::kernels {

// One block of a traced kernel: 48 bytes. wait_ns: when its thread 0 came back from
// griddepcontrol.wait (0: no wait); tag: kernels/cuda/kernel_trace.cuh's Tag; key: the
// launch's own pointer (its weights or its layer's cache); block: the linear block index; grid:
// the blocks of the launch; sm: the multiprocessor.
struct KernelTraceRecord {
  uint64_t start_ns;
  uint64_t key;
  uint64_t wait_ns;
  uint64_t end_ns;
  uint32_t tag;
  uint32_t block;
  uint32_t sm;
  uint32_t grid;
};
static_assert(sizeof(KernelTraceRecord) == 48);

// Warp places a multiprocessor has (%warpid < 64 on every GPU so far).
inline constexpr unsigned int kKernelTraceWarpSlots = 64;

// Where the device writes: records [sms][per_sm], counts [sms] (how many each SM took), and
// wait_ns [sms][kKernelTraceWarpSlots] (the last wait time of the block on each warp place).
struct KernelTraceBuffers {
  KernelTraceRecord* records;
  unsigned int* counts;
  uint64_t* wait_ns;
  unsigned int per_sm;
};

// Each CUDA translation unit with traced kernels registers how to point its own copy of the
// device state at the buffers (kernels/cuda/kernel_trace.cuh does it at static initialisation).
using KernelTraceAttach = void (*)(const KernelTraceBuffers& buffers);
bool register_kernel_trace_module(KernelTraceAttach attach);

// Whether this build stamps (NANOVLLM_KERNEL_TRACE).
bool kernel_trace_built();
// NANOVLLM_KERNEL_TRACE_DIR (read once): where dumps go; empty: tracing off (and in a build
// without the stamps, whatever it says: the runner warns).
const std::string& kernel_trace_dir();
// The decode graph replays of a runner (counted from 0) that one dump covers:
// NANOVLLM_KERNEL_TRACE_STEPS=FIRST:LAST (default 8:11); NANOVLLM_KERNEL_TRACE_BATCH=N (default
// 0: any): only replays of N rows count. std::invalid_argument naming the variable otherwise.
struct KernelTraceWindow {
  int first = 8, last = 11;
  int64_t batch = 0;
};
KernelTraceWindow kernel_trace_window();

// Allocates the buffers (per_sm block records a multiprocessor) and points every registered module
// at them; call before any graph capture (it copies to device symbols). Idempotent. Returns the
// number of modules attached.
size_t kernel_trace_attach(unsigned int per_sm);
// Forgets the records so far (stream-ordered).
void kernel_trace_reset(cudaStream_t stream);
// Waits for `stream`, then writes the records to `path`: a header line "nanovllm-kernel-trace
// v2 sms=N", then N counts (uint32, each at most the records an SM holds) and each SM's
// records in turn. Returns the records written and those that found their SM's buffer full.
struct KernelTraceDumped {
  size_t records = 0, dropped = 0;
};
KernelTraceDumped kernel_trace_dump(cudaStream_t stream, const std::string& path);

}  // namespace nanovllm::kernels
