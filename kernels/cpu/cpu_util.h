// Small helpers shared by the CPU reference kernels: bf16 element access through a
// TensorView's strides, and a fork-join loop over the persistent thread pool.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels::cpu {

// Pointer to element (i0, i1, ...) of a view; trailing indices default to 0.
template <typename T>
inline T* elem(const TensorView& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  return t.ptr<T>() + i0 * t.stride[0] + (t.ndim > 1 ? i1 * t.stride[1] : 0) +
         (t.ndim > 2 ? i2 * t.stride[2] : 0) + (t.ndim > 3 ? i3 * t.stride[3] : 0);
}

inline float load_bf16(const uint16_t* p) {
  return bf16_to_float(*p);
}

// fn(begin, end) over [0, n) split into `threads` contiguous chunks, on the persistent pool;
// runs inline when one thread suffices. Callers make each element's result independent of
// the chunking, so the result never depends on the thread count.
template <typename Fn>
void parallel_for(int64_t n, int threads, Fn&& fn) {
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(threads, n));
  if (workers == 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  const int64_t chunk = (n + workers - 1) / workers;
  cpu_thread_pool().run(static_cast<int>(workers), [&](int w) {
    const int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b < e) fn(b, e);
  });
}

}  // namespace nanovllm::kernels::cpu
