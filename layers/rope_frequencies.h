// The rotary embedding's frequency table for a model config: plain RoPE's theta powers, or
// YaRN's blend of them with their interpolated (divided by the factor) copies. Computed on the
// host in f32 step by step as transformers does, so the angles match the reference's; the
// attention layer uploads it and hands it to the kernels as kernels::RopeFrequencies.
#pragma once

#include <vector>

#include "layers/model_config.h"

namespace nanovllm {

struct RopeTable {
  std::vector<float> inv_freq;     // [head_dim / 2]
  float attention_scaling = 1.0f;  // YaRN's mscale; 1 for plain RoPE
};

// Plain (c.rope_scaling unset):
//   inv_freq[i] = 1 / theta^(2i / D), every step in f32.
// YaRN (c.rope_scaling set), with O = original_max_position_embeddings:
//   corr(r) = D ln(O / (2 pi r)) / (2 ln theta), low = corr(beta_fast), high = corr(beta_slow)
//   (floor/ceil when truncate), clamped to [0, D - 1];
//   ramp(i) = clamp((i - low) / (high - low), 0, 1); extra(i) = 1 - ramp(i);
//   inv_freq[i] = plain[i] / factor * (1 - extra(i)) + plain[i] * extra(i)
//   (below low: plain, extrapolated; above high: plain / factor, interpolated);
//   attention_scaling = attention_factor, else 0.1 ln(factor) + 1 (1 when factor <= 1).
RopeTable rope_table(const ModelConfig& c);

}  // namespace nanovllm
