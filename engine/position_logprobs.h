// What a request's logprobs / prompt_logprobs return for one position (vLLM's Logprob dicts):
// the chosen token (sampled, or the prompt's own token) with its log-probability and rank under
// the raw distribution, and the top alternatives.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace nanovllm {

struct PositionLogprobs {
  int32_t token_id = -1;  // the sampled token, or the prompt token at this position
  float logprob = 0.0f;   // log_softmax of the raw logits at token_id
  int32_t rank = 0;       // 1 + tokens with a higher logprob (ties counted: vLLM's)
  // [N] (token id, logprob), best first (ties: lower id first); N = the request's logprobs
  // or prompt_logprobs (0: empty). May contain token_id.
  std::vector<std::pair<int32_t, float>> top;
};

}  // namespace nanovllm
