// Asynchronous global -> shared copies (sm_80+ cp.async), for kernels that keep several tiles
// in flight while computing on an earlier one. Each thread's copies form commit groups;
// cp_async_wait<N> returns once at most N of this thread's groups are still pending. A copy is
// visible to other threads only after that wait AND a barrier (__syncthreads).
#pragma once

#include <cstdint>

namespace nanovllm::kernels::cuda {

// Copies 16 bytes from global `src` to shared `dst` (both 16-byte aligned) through L2 only
// (.cg: streamed data is not worth L1). With valid == false nothing is read and `dst` is
// zero-filled; `src` must still be a mapped address (pass any valid base pointer).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes)
               : "memory");
}

// The same for 4 bytes (both 4-byte aligned), through L1 (.ca: .cg takes 16-byte copies only).
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  const int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace nanovllm::kernels::cuda
