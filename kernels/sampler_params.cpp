// The per-slot parameters' shapes, dtypes and groups, the same for both backends.
#include "kernels/sampler.h"

namespace nanovllm::kernels {

void check_draw_params(const SamplingSlotParams& p, Device device) {
  const int64_t n = p.temperatures.ndim == 1 ? p.temperatures.size(0) : -1;
  const auto check = [&](const TensorView& t, DType dtype, const char* name) {
    CHECK_MSG(t.data != nullptr, "sampler " << name << " is null");
    CHECK_MSG(t.device == device, "sampler " << name << " is on the wrong device");
    CHECK_MSG(t.dtype == dtype, "sampler " << name << " has dtype " << dtype_name(t.dtype)
                                           << ", expected " << dtype_name(dtype));
    CHECK_MSG(t.ndim == 1 && t.size(0) == n && t.stride[0] == 1,
              "sampler " << name << " is " << t.shape_str() << ", expected [" << n << "]");
  };
  check(p.temperatures, DType::kF32, "temperatures");
  check(p.top_k, DType::kI32, "top_k");
  check(p.top_p, DType::kF32, "top_p");
  check(p.min_p, DType::kF32, "min_p");
  check(p.seeds, DType::kI64, "seeds");
}

void check_slot_params(const SamplingSlotParams& p, int64_t vocab) {
  check_draw_params(p, p.temperatures.device);
  const int64_t n = p.temperatures.size(0);
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
