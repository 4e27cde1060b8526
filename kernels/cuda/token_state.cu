// The sampler's token_state written from the host's entries (kernels/sampler.h's
// scatter_token_state): one thread per (slot, token id, state) entry.
#include "kernels/cuda/common.cuh"
#include "kernels/sampler.h"

namespace nanovllm::kernels::cuda {
namespace {

constexpr int kThreads = 256;

struct Args {
  uint16_t* token_state;  // [N, V], rows ld apart
  int64_t ld;
  int num_slots, vocab;
  const int32_t* entries;  // [E, 3] (slot, id, state), rows entries_ld apart
  int64_t entries_ld;
  int count;  // E
};

// Launched as a dependent grid (common.cuh): every access follows the wait.
__global__ void __launch_bounds__(kThreads) scatter_token_state_kernel(Args a) {
  NANOVLLM_TRACE_SCOPE(trace::kTokenState, nullptr);
  wait_for_previous_grid();
  const int e = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (e >= a.count) return;
  const int32_t* entry = a.entries + e * a.entries_ld;
  const int32_t slot = entry[0], id = entry[1], state = entry[2];
  // An entry outside the buffer is the caller's bug (the CPU reference CHECKs it).
  if (slot < 0 || slot >= a.num_slots || id < 0 || id >= a.vocab || state < 0 || state > 0xffff)
    __trap();
  a.token_state[slot * a.ld + id] = static_cast<uint16_t>(state);
}

}  // namespace

void scatter_token_state(const TensorView& token_state, const TensorView& entries,
                         cudaStream_t stream) {
  check_cuda_tensor(token_state, DType::kU16, "token_state");
  check_cuda_tensor(entries, DType::kI32, "token_state entries");
  CHECK_EQ(token_state.ndim, 2);
  CHECK_LT(token_state.size(1), int64_t{1} << 31);
  CHECK(entries.ndim == 2 && entries.size(1) == 3);
  const int64_t count = entries.size(0);
  CHECK_LT(count, int64_t{1} << 31);
  if (count == 0) return;
  const Args a{token_state.ptr<uint16_t>(),
               token_state.stride[0],
               static_cast<int>(token_state.size(0)),
               static_cast<int>(token_state.size(1)),
               entries.ptr<int32_t>(),
               entries.stride[0],
               static_cast<int>(count)};
  launch_dependent(scatter_token_state_kernel, dim3(ceil_div(count, kThreads)), dim3(kThreads),
                   stream, a);
}

}  // namespace nanovllm::kernels::cuda
