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

void kernel_trace_window(int& first, int& last, int64_t& batch) {
  first = 8;
  last = 11;
  batch = 0;
  if (const char* n = std::getenv("NANOVLLM_KERNEL_TRACE_BATCH"); n != nullptr && *n != '\0') {
    char* end = nullptr;
    batch = std::strtoll(n, &end, 10);
    if (*end != '\0' || batch < 0)
      throw std::invalid_argument(std::string("NANOVLLM_KERNEL_TRACE_BATCH=") + n +
                                  ": expected a batch size");
  }
  const char* v = std::getenv("NANOVLLM_KERNEL_TRACE_STEPS");
  if (v == nullptr || *v == '\0') return;
  int a = 0, b = 0;
  if (std::sscanf(v, "%d:%d", &a, &b) != 2 || a < 0 || b < a)
    throw std::invalid_argument(std::string("NANOVLLM_KERNEL_TRACE_STEPS=") + v +
                                ": expected FIRST:LAST, 0 <= FIRST <= LAST");
  first = a;
  last = b;
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
  std::vector<KernelTraceRecord> records(slots * s.buffers.per_sm);
  CUDA_CHECK(cudaMemcpy(counts.data(), s.buffers.counts, slots * sizeof(unsigned int),
                        cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(records.data(), s.buffers.records,
                        records.size() * sizeof(KernelTraceRecord), cudaMemcpyDeviceToHost));
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("kernel trace: cannot write " + path);
  char header[128];
  const int n = std::snprintf(header, sizeof(header), "nanovllm-kernel-trace v2 sms=%zu\n", slots);
  out.write(header, n);
  std::vector<unsigned int> kept(slots);
  for (size_t i = 0; i < slots; ++i) kept[i] = std::min(counts[i], s.buffers.per_sm);
  out.write(reinterpret_cast<const char*>(kept.data()),
            static_cast<std::streamsize>(kept.size() * sizeof(unsigned int)));
  for (size_t i = 0; i < slots; ++i)
    out.write(reinterpret_cast<const char*>(records.data() + i * s.buffers.per_sm),
              static_cast<std::streamsize>(kept[i] * sizeof(KernelTraceRecord)));
  out.flush();
  if (!out) throw std::runtime_error("kernel trace: writing " + path + " failed");
  KernelTraceDumped d;
  for (unsigned int c : counts) {
    d.records += std::min(c, s.buffers.per_sm);
    d.dropped += c > s.buffers.per_sm ? c - s.buffers.per_sm : 0;
  }
  return d;
}

}  // namespace nanovllm::kernels
