// Per-request sampling settings (vLLM's names). Validation of user values happens where
// requests are read; the engine assumes they are in range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

// The smallest temperature that samples; (0, 0.01) is raised to it (vLLM's rule; the
// samplers apply the same bound, kernels::kMinTemperature).
inline constexpr float kMinSamplingTemperature = 0.01f;

struct SamplingParams {
  float temperature = 1.0f;      // 0 = greedy
  int32_t top_k = -1;            // <= 0: disabled
  float top_p = 1.0f;            // (0, 1]; 1 = disabled
  float min_p = 0.0f;            // [0, 1]; 0 = disabled
  std::optional<uint64_t> seed;  // unset: the engine derives one from its seed and the request
  int32_t max_tokens = 64;
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop strings (later issue)

  bool greedy() const { return temperature == 0.0f; }
};

}  // namespace nanovllm
