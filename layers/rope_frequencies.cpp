#include "layers/rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/check.h"

namespace nanovllm {

namespace {

// theta^(2i / D) for i in [0, D/2): the exponent is an f32 division, the power an f32 pow,
// as transformers' `base ** (arange(0, D, 2).float() / D)`.
std::vector<float> pos_freqs(float theta, int64_t d) {
  std::vector<float> out(static_cast<size_t>(d / 2));  // [D/2]
  for (int64_t i = 0; i < d / 2; ++i)
    out[i] = std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(d));
  return out;
}

// The (fractional) pair index whose wavelength makes `rotations` turns over O positions.
double correction_dim(double rotations, double theta, double d, double original_max) {
  return d * std::log(original_max / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(theta));
}

RopeTable yarn_table(const RopeScaling& s, float theta, int64_t d) {
  CHECK(s.factor > 0);
  CHECK(s.original_max_position_embeddings > 0);
  const double o = static_cast<double>(s.original_max_position_embeddings);
  double low = correction_dim(s.beta_fast, theta, static_cast<double>(d), o);
  double high = correction_dim(s.beta_slow, theta, static_cast<double>(d), o);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(d - 1));
  if (low == high) high += 0.001;  // the ramp divides by high - low
  // The ramp's arithmetic is f32 (a float tensor against Python scalars in transformers).
  const float low_f = static_cast<float>(low), span = static_cast<float>(high - low);
  const float factor = static_cast<float>(s.factor);
  const std::vector<float> pf = pos_freqs(theta, d);
  RopeTable t;
  t.inv_freq.resize(pf.size());
  for (size_t i = 0; i < pf.size(); ++i) {
    const float ramp = std::clamp((static_cast<float>(i) - low_f) / span, 0.0f, 1.0f);
    const float extra = 1.0f - ramp;  // weight of the extrapolated (plain) frequency
    const float inv_extra = 1.0f / pf[i];
    const float inv_inter = 1.0f / (factor * pf[i]);
    t.inv_freq[i] = inv_inter * (1.0f - extra) + inv_extra * extra;
  }
  const double scaling = s.attention_factor ? *s.attention_factor
                         : s.factor <= 1.0  ? 1.0
                                            : 0.1 * std::log(s.factor) + 1.0;
  t.attention_scaling = static_cast<float>(scaling);
  return t;
}

}  // namespace

RopeTable rope_table(const ModelConfig& c) {
  CHECK(c.head_dim > 0 && c.head_dim % 2 == 0);
  CHECK(c.rope_theta > 0);
  if (c.rope_scaling) return yarn_table(*c.rope_scaling, c.rope_theta, c.head_dim);
  RopeTable t;
  for (const float p : pos_freqs(c.rope_theta, c.head_dim)) t.inv_freq.push_back(1.0f / p);
  return t;
}

}  // namespace nanovllm
