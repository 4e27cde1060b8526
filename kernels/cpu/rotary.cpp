#include "kernels/rotary.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

namespace {

void check_heads(const TensorView& t) {
  CHECK(t.dtype == DType::kBf16 && t.ndim == 3 && t.stride[2] == 1 && t.stride[1] == t.size(2));
}

// One head in place: optional RMSNorm over D, then neox rotation of pairs (i, i + D/2).
// cos_sin: [D/2, 2] f32 for this token's position.
void apply_head(uint16_t* head, int64_t d, const uint16_t* norm_w, float eps, const float* cos_sin,
                float* scratch /* [D] */) {
  for (int64_t i = 0; i < d; ++i) scratch[i] = bf16_to_float(head[i]);
  if (norm_w != nullptr) {
    float sum_sq = 0.0f;
    for (int64_t i = 0; i < d; ++i) sum_sq += scratch[i] * scratch[i];
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(d) + eps);
    for (int64_t i = 0; i < d; ++i) scratch[i] = scratch[i] * inv_rms * bf16_to_float(norm_w[i]);
  }
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
    const float x1 = scratch[i], x2 = scratch[i + half];
    head[i] = float_to_bf16(x1 * c - x2 * s);
    head[i + half] = float_to_bf16(x2 * c + x1 * s);
  }
}

}  // namespace

void qk_norm_rope(const TensorView& q, const TensorView& k, const TensorView& q_norm_weight,
                  const TensorView& k_norm_weight, const TensorView& positions, float eps,
                  const RopeFrequencies& rope) {
  check_heads(q);
  check_heads(k);
  const int64_t d = q.size(2);
  CHECK_EQ(k.size(2), d);
  CHECK_EQ(d % 2, 0);
  CHECK_EQ(q.size(0), k.size(0));
  CHECK_EQ(positions.size(0), q.size(0));
  const int64_t half = d / 2;
  const TensorView& freq = rope.inv_freq;
  CHECK(freq.on_cpu() && freq.dtype == DType::kF32 && freq.is_contiguous());
  CHECK_EQ(freq.numel(), half);
  const float* inv_freq = freq.ptr<float>();  // [D/2]
  const double scaling = rope.attention_scaling;
  std::vector<float> cos_sin(static_cast<size_t>(d));  // [D/2, 2]
  std::vector<float> scratch(static_cast<size_t>(d));  // [D]
  const auto* qw = static_cast<const uint16_t*>(q_norm_weight.data);
  const auto* kw = static_cast<const uint16_t*>(k_norm_weight.data);
  for (int64_t t = 0; t < q.size(0); ++t) {
    const float pos = static_cast<float>(*elem<int32_t>(positions, t));
    for (int64_t i = 0; i < half; ++i) {
      // The f32 angle, as the CUDA kernel and transformers form it; its cos/sin in double,
      // scaled, then rounded once to f32 (correctly rounded bar double's own error).
      const double angle = static_cast<double>(pos * inv_freq[i]);
      cos_sin[2 * i] = static_cast<float>(std::cos(angle) * scaling);
      cos_sin[2 * i + 1] = static_cast<float>(std::sin(angle) * scaling);
    }
    for (int64_t h = 0; h < q.size(1); ++h)
      apply_head(elem<uint16_t>(q, t, h), d, qw, eps, cos_sin.data(), scratch.data());
    for (int64_t h = 0; h < k.size(1); ++h)
      apply_head(elem<uint16_t>(k, t, h), d, kw, eps, cos_sin.data(), scratch.data());
  }
}

}  // namespace nanovllm::kernels::cpu
