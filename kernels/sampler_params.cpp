// The per-slot parameters' shapes, dtypes and groups, the same for both backends.
#include "kernels/sampler.h"

namespace nanovllm::kernels {

void check_slot_params(const SamplingSlotParams& p, int64_t vocab) {
  const int64_t n = p.temperatures.size(0);
  CHECK_EQ(p.temperatures.ndim, 1);
  CHECK(p.temperatures.dtype == DType::kF32 && p.top_k.dtype == DType::kI32);
  CHECK(p.top_p.dtype == DType::kF32 && p.min_p.dtype == DType::kF32);
  CHECK(p.seeds.dtype == DType::kI64);
  CHECK(p.top_k.size(0) == n && p.top_p.size(0) == n && p.min_p.size(0) == n &&
        p.seeds.size(0) == n);
  CHECK_EQ(p.min_tokens_position.data == nullptr, p.min_tokens_masked_ids.data == nullptr);
  if (p.min_tokens_position.data != nullptr) {
    CHECK(p.min_tokens_position.dtype == DType::kI32 && p.min_tokens_position.size(0) == n);
    CHECK(p.min_tokens_masked_ids.dtype == DType::kI32 && p.min_tokens_masked_ids.ndim == 2);
    CHECK_EQ(p.min_tokens_masked_ids.size(0), n);
  }
  const bool penalties = p.repetition_penalty.data != nullptr;
  CHECK_MSG(penalties == (p.presence_penalty.data != nullptr) &&
                penalties == (p.frequency_penalty.data != nullptr) &&
                penalties == (p.token_state.data != nullptr),
            "sampler penalties: all four or none");
  if (penalties) {
    CHECK(p.repetition_penalty.dtype == DType::kF32 && p.repetition_penalty.size(0) == n);
    CHECK(p.presence_penalty.dtype == DType::kF32 && p.presence_penalty.size(0) == n);
    CHECK(p.frequency_penalty.dtype == DType::kF32 && p.frequency_penalty.size(0) == n);
    CHECK(p.token_state.dtype == DType::kU16 && p.token_state.ndim == 2);
    CHECK(p.token_state.size(0) == n && p.token_state.size(1) == vocab);
  }
  const bool bias = p.logit_bias_count.data != nullptr;
  CHECK_MSG(
      bias == (p.logit_bias_ids.data != nullptr) && bias == (p.logit_bias_values.data != nullptr),
      "sampler logit_bias: all three or none");
  if (bias) {
    CHECK(p.logit_bias_count.dtype == DType::kI32 && p.logit_bias_count.size(0) == n);
    CHECK(p.logit_bias_ids.dtype == DType::kI32 && p.logit_bias_ids.ndim == 2);
    CHECK(p.logit_bias_values.dtype == DType::kF32 && p.logit_bias_values.ndim == 2);
    CHECK(p.logit_bias_ids.size(0) == n && p.logit_bias_values.size(0) == n);
    CHECK_EQ(p.logit_bias_values.size(1), p.logit_bias_ids.size(1));
  }
  if (p.num_logprobs.data != nullptr)
    CHECK(p.num_logprobs.dtype == DType::kI32 && p.num_logprobs.size(0) == n);
}

}  // namespace nanovllm::kernels
