#include "kernels/pending_inputs.h"

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

void resolve_pending_inputs(const TensorView& input_ids, const TensorView& slots,
                            const TensorView& last_tokens) {
  CHECK(input_ids.dtype == DType::kI32 && slots.dtype == DType::kI32 &&
        last_tokens.dtype == DType::kI32);
  CHECK_EQ(input_ids.size(0), slots.size(0));
  for (int64_t r = 0; r < input_ids.size(0); ++r) {
    int32_t& id = *elem<int32_t>(input_ids, r);
    if (id >= 0) continue;
    const int32_t slot = *elem<int32_t>(slots, r);
    CHECK_MSG(slot >= 0 && slot < last_tokens.size(0), "pending input of row "
                                                           << r << " names slot " << slot << " of "
                                                           << last_tokens.size(0));
    id = *elem<int32_t>(last_tokens, slot);
  }
}

}  // namespace nanovllm::kernels::cpu
