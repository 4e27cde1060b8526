// Per-request sampling settings (vLLM's names). Validation of user values happens where
// requests are read; the engine assumes they are in range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nanovllm {

// The smallest temperature that samples; (0, 0.01) is raised to it (vLLM's rule; the
// samplers apply the same bound, kernels::kMinTemperature).
inline constexpr float kMinSamplingTemperature = 0.01f;

// Request limits checked where requests are read (an error record past them).
inline constexpr int kMaxStopStrings = 32;
inline constexpr int kMaxStopTokenIds = 32;
inline constexpr int kMaxCompletionsPerRequest = 64;  // n
inline constexpr int kMaxLogprobs = 20;               // logprobs, prompt_logprobs (vLLM's)
inline constexpr int kMaxLogitBias = 1024;            // logit_bias entries
// vLLM's ranges: presence / frequency in [-2, 2], repetition > 0; a bias in [-100, 100].
inline constexpr float kMaxAbsPresenceFrequencyPenalty = 2.0f;
inline constexpr float kMaxAbsLogitBias = 100.0f;

struct SamplingParams {
  float temperature = 1.0f;      // 0 = greedy
  int32_t top_k = -1;            // <= 0: disabled
  float top_p = 1.0f;            // (0, 1]; 1 = disabled
  float min_p = 0.0f;            // [0, 1]; 0 = disabled
  std::optional<uint64_t> seed;  // unset: the engine derives one from its seed and the request
  int32_t max_tokens = 64;
  bool ignore_eos = false;
  // Stop conditions (vLLM's SamplingParams). A stop string ends generation when the
  // detokenized completion contains it (the text is cut before it unless
  // include_stop_str_in_output); a stop_token_ids entry ends it like eos. Until min_tokens
  // completion tokens exist, eos and stop_token_ids cannot be sampled and stop strings are
  // not looked for.
  std::vector<std::string> stop;        // [<= kMaxStopStrings] non-empty strings
  std::vector<int32_t> stop_token_ids;  // [<= kMaxStopTokenIds] ids in the vocabulary
  bool include_stop_str_in_output = false;
  int32_t min_tokens = 0;  // [0, max_tokens]
  // Detokenization of the output text (vLLM's meaning; with a byte-level BPE tokenizer such
  // as Qwen3's, spaces_between_special_tokens changes nothing, as in vLLM's fast path).
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  // Completions of the prompt; completion i > 0 samples with completion_seed(seed, i).
  int32_t n = 1;
  // Computed on the device (kernels/sampler.h rule P; kernels/logprobs.h), vLLM's meanings.
  // Penalties, applied before temperature: presence / frequency (OpenAI's) over the generated
  // tokens, repetition (transformers') over the prompt and the generated tokens.
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  // Added to the logits before the penalties: (token id, bias in [-100, 100]), ids unique
  // and in the vocabulary, [<= kMaxLogitBias], ascending by id.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Per generated token: its log-probability under the raw distribution (before bias,
  // penalties, temperature and filters), its rank, and the top `logprobs` alternatives.
  std::optional<int32_t> logprobs;  // [0, kMaxLogprobs]
  // The same for every prompt token after the first (the prompt is then computed in full:
  // none of it comes from the prefix cache).
  std::optional<int32_t> prompt_logprobs;  // [0, kMaxLogprobs]

  bool greedy() const { return temperature == 0.0f; }
  bool penalized() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

// The seed of completion `index` of a request seeded `seed`: the seed itself for index 0 (so
// n = 1 samples as before), else a splitmix64 mix of both, so each completion draws its own,
// reproducible tokens.
inline uint64_t completion_seed(uint64_t seed, int32_t index) {
  if (index == 0) return seed;
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(index);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace nanovllm
