// The host side of the kernel timeline (kernels/kernel_trace.h): the module registry, the
// buffers, the window and the dump.
#include "kernels/kernel_trace.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "kernels/check.h"

namespace nanovllm::kernels {
namespace {

std::vector<KernelTraceAttach>& modules() {
  static std::vector<KernelTraceAttach> m;  // built at static initialisation: no lock needed
  return m;
}

struct State {
  std::mutex mu;
  KernelTraceBuffers buffers{nullptr, nullptr, nullptr, 0};
  int sms = 0;
};
State& state() {
  static State s;
  return s;
}

}  // namespace

bool register_kernel_trace_module(KernelTraceAttach attach) {
  modules().push_back(attach);
  return true;
}

bool kernel_trace_built() {
#ifdef NANOVLLM_KERNEL_TRACE
  return true;
#else
  return false;
#endif
}

const std::string& kernel_trace_dir() {
  static const std::string dir = [] {
    const char* v = std::getenv("NANOVLLM_KERNEL_TRACE_DIR");
    return v == nullptr ? std::string() : std::string(v);
  }();
  return dir;
}

KernelTraceWindow kernel_trace_window() {
  KernelTraceWindow w;
  if (const char* n = std::getenv("NANOVLLM_KERNEL_TRACE_BATCH"); n != nullptr && *n != '\0') {
    char* end = nullptr;
    w.batch = std::strtoll(n, &end, 10);
    if (*end != '\0' || w.batch < 0)
      throw std::invalid_argument(std::string("NANOVLLM_KERNEL_TRACE_BATCH=") + n +
                                  ": expected a batch size");
  }
  const char* v = std::getenv("NANOVLLM_KERNEL_TRACE_STEPS");
  if (v == nullptr || *v == '\0') return w;
  if (std::sscanf(v, "%d:%d", &w.first, &w.last) != 2 || w.first < 0 || w.last < w.first)
    throw std::invalid_argument(std::string("NANOVLLM_KERNEL_TRACE_STEPS=") + v +
                                ": expected FIRST:LAST, 0 <= FIRST <= LAST");
  return w;
}

size_t kernel_trace_attach(unsigned int per_sm) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.buffers.records != nullptr) return modules().size();
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&s.sms, cudaDevAttrMultiProcessorCount, device));
  // %smid may exceed the count on some parts: room for twice as many.
  const size_t slots = static_cast<size_t>(2 * s.sms);
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.buffers.records),
                        slots * per_sm * sizeof(KernelTraceRecord)));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.buffers.counts), slots * sizeof(unsigned int)));
  CUDA_CHECK(cudaMemset(s.buffers.counts, 0, slots * sizeof(unsigned int)));
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.buffers.wait_ns),
                        slots * kKernelTraceWarpSlots * sizeof(uint64_t)));
  s.buffers.per_sm = per_sm;
  for (KernelTraceAttach attach : modules()) attach(s.buffers);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaDeviceSynchronize());
  return modules().size();
}

void kernel_trace_reset(cudaStream_t stream) {
  State& s = state();
  if (s.buffers.counts == nullptr) return;
  CUDA_CHECK(cudaMemsetAsync(s.buffers.counts, 0, 2 * s.sms * sizeof(unsigned int), stream));
}

KernelTraceDumped kernel_trace_dump(cudaStream_t stream, const std::string& path) {
  State& s = state();
  if (s.buffers.counts == nullptr) return {};
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const size_t slots = static_cast<size_t>(2 * s.sms);
  std::vector<unsigned int> counts(slots);
  CUDA_CHECK(cudaMemcpy(counts.data(), s.buffers.counts, slots * sizeof(unsigned int),
                        cudaMemcpyDeviceToHost));
  // Each SM's records as far as it wrote them (at most per_sm; the rest were dropped).
  KernelTraceDumped d;
  std::vector<unsigned int> kept(slots);
  for (size_t i = 0; i < slots; ++i) {
    kept[i] = std::min(counts[i], s.buffers.per_sm);
    d.records += kept[i];
    d.dropped += counts[i] - kept[i];
  }
  std::vector<KernelTraceRecord> records(d.records);
  size_t at = 0;
  for (size_t i = 0; i < slots; ++i) {
    CUDA_CHECK(cudaMemcpy(records.data() + at, s.buffers.records + i * s.buffers.per_sm,
                          kept[i] * sizeof(KernelTraceRecord), cudaMemcpyDeviceToHost));
    at += kept[i];
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("kernel trace: cannot write " + path);
  char header[128];
  const int n = std::snprintf(header, sizeof(header), "nanovllm-kernel-trace v2 sms=%zu\n", slots);
  out.write(header, n);
  out.write(reinterpret_cast<const char*>(kept.data()),
            static_cast<std::streamsize>(kept.size() * sizeof(unsigned int)));
  out.write(reinterpret_cast<const char*>(records.data()),
            static_cast<std::streamsize>(records.size() * sizeof(KernelTraceRecord)));
  out.flush();
  if (!out) throw std::runtime_error("kernel trace: writing " + path + " failed");
  return d;
}

}  // namespace nanovllm::kernels
