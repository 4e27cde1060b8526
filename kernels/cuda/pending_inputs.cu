// The pending inputs of a decode step launched ahead (kernels/pending_inputs.h): one thread a
// row, each a read of the row's slot in last_tokens.
#include "kernels/cuda/common.cuh"
#include "kernels/pending_inputs.h"

namespace nanovllm::kernels::cuda {
namespace {

// input_ids, slots: [rows]; last_tokens: [num_slots]. A pending row naming no valid slot traps:
// rank 0's engine built a command it should not have.
__global__ void resolve_pending_inputs_kernel(int32_t* __restrict__ input_ids,
                                              const int32_t* __restrict__ slots,
                                              const int32_t* __restrict__ last_tokens, int rows,
                                              int num_slots) {
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= rows || input_ids[r] >= 0) return;
  const int32_t slot = slots[r];
  if (slot < 0 || slot >= num_slots) __trap();
  input_ids[r] = last_tokens[slot];
}

}  // namespace

void resolve_pending_inputs(const TensorView& input_ids, const TensorView& slots,
                            const TensorView& last_tokens, cudaStream_t stream) {
  check_cuda_tensor(input_ids, DType::kI32, "pending inputs ids");
  check_cuda_tensor(slots, DType::kI32, "pending inputs slots");
  check_cuda_tensor(last_tokens, DType::kI32, "pending inputs last_tokens");
  const int64_t rows = input_ids.size(0);
  CHECK_EQ(slots.size(0), rows);
  if (rows == 0) return;
  constexpr int kThreads = 256;
  resolve_pending_inputs_kernel<<<static_cast<unsigned>((rows + kThreads - 1) / kThreads), kThreads,
                                  0, stream>>>(input_ids.ptr<int32_t>(), slots.ptr<int32_t>(),
                                               last_tokens.ptr<int32_t>(), static_cast<int>(rows),
                                               static_cast<int>(last_tokens.size(0)));
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::kernels::cuda
