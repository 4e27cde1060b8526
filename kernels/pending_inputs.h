// Async scheduling's inputs (ipc/step_command.h's kPendingInputToken): a decode step launched
// while the step before it runs takes the tokens that step samples, which only the device has.
// The sampler writes each row's token to its slot's entry of last_tokens (kernels/sampler.h),
// so a pending row's input is last_tokens[its slot]. Runs before the step's forward pass, on
// the same stream as the sampler, which orders it after the token it reads.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/tensor.h"

namespace nanovllm::kernels {

// input_ids: [B] i32, in place: every negative entry (pending) becomes last_tokens[slots[r]];
// the others stay. slots: [B] i32, a pending row's slot in [0, N). last_tokens: [N] i32.
namespace cpu {
void resolve_pending_inputs(const TensorView& input_ids, const TensorView& slots,
                            const TensorView& last_tokens);
}
namespace cuda {
void resolve_pending_inputs(const TensorView& input_ids, const TensorView& slots,
                            const TensorView& last_tokens, cudaStream_t stream);
}

}  // namespace nanovllm::kernels
