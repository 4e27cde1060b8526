#include "engine/sequence.h"

#include <algorithm>

#include "kernels/check.h"

namespace nanovllm {

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kError:
      return "error";
    case FinishReason::kNone:
      break;
  }
  return "";
}

std::string prompt_room_error(int64_t num_prompt_tokens, int max_model_len) {
  if (num_prompt_tokens < max_model_len) return {};
  return "prompt is " + std::to_string(num_prompt_tokens) +
         " tokens, which leaves no room to generate within max_model_len " +
         std::to_string(max_model_len);
}

Sequence::Sequence(int64_t id, std::vector<int32_t> prompt, SamplingParams params, int bs)
    : seq_id(id),
      request_id(id),
      token_ids(std::move(prompt)),
      last_token(token_ids.empty() ? -1 : token_ids.back()),
      num_prompt_tokens(static_cast<int>(token_ids.size())),
      sampling_params(std::move(params)),
      block_size(bs) {
  CHECK_GT(block_size, 0);
}

std::span<const int32_t> Sequence::block(int i) const {
  CHECK(0 <= i && i < num_blocks());
  const size_t begin = static_cast<size_t>(i) * block_size;
  const size_t end = std::min(token_ids.size(), begin + block_size);
  return std::span<const int32_t>(token_ids).subspan(begin, end - begin);
}

void Sequence::append_token(int32_t token_id) {
  token_ids.push_back(token_id);
  last_token = token_id;
}

}  // namespace nanovllm
