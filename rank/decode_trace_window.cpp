#include "rank/decode_trace_window.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "kernels/kernel_trace.h"

namespace nanovllm {
namespace {

// Block records a multiprocessor holds: a 0.6B batch-1 step makes about 310 an SM.
constexpr unsigned int kRecordsPerSm = 1u << 14;

std::atomic<int> g_dumps{0};

}  // namespace

DecodeTraceWindow::DecodeTraceWindow(int rank) : rank_(rank) {
  const std::string& dir = kernels::kernel_trace_dir();
  if (dir.empty()) return;
  if (!kernels::kernel_trace_built()) {
    spdlog::warn(
        "NANOVLLM_KERNEL_TRACE_DIR is set, but this build has no kernel stamps "
        "(configure with -DNANOVLLM_KERNEL_TRACE=ON): no trace");
    return;
  }
  window_ = kernels::kernel_trace_window();
  const size_t modules = kernels::kernel_trace_attach(kRecordsPerSm);
  on_ = true;
  spdlog::info("rank {}: kernel trace of decode replays {}..{}{} into {} ({} modules stamp)", rank_,
               window_.first, window_.last,
               window_.batch == 0 ? std::string() : " of batch " + std::to_string(window_.batch),
               dir, modules);
}

void DecodeTraceWindow::before_replay(cudaStream_t stream, int64_t batch) {
  if (on_ && (window_.batch == 0 || batch == window_.batch) && replays_ == window_.first)
    kernels::kernel_trace_reset(stream);
}

void DecodeTraceWindow::after_replay(cudaStream_t stream, int64_t batch) {
  if (!on_ || (window_.batch != 0 && batch != window_.batch)) return;
  if (replays_++ != window_.last) return;
  const std::string path = kernels::kernel_trace_dir() + "/trace_rank" + std::to_string(rank_) +
                           "_pid" + std::to_string(getpid()) + "_" +
                           std::to_string(g_dumps.fetch_add(1)) + ".bin";
  const kernels::KernelTraceDumped d = kernels::kernel_trace_dump(stream, path);
  spdlog::info(
      "rank {}: kernel trace of decode replays {}..{} (batch {} at the last): {} block records "
      "({} dropped) in {}",
      rank_, window_.first, window_.last, batch, d.records, d.dropped, path);
}

}  // namespace nanovllm
