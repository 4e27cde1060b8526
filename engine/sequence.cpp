#include "engine/sequence.h"

#include <algorithm>

#include "kernels/check.h"

namespace nanovllm {

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::STOP:
      return "stop";
    case FinishReason::LENGTH:
      return "length";
    case FinishReason::NONE:
      break;
  }
  return "";
}

Sequence::Sequence(int64_t id, std::vector<int32_t> prompt, SamplingParams params, int bs)
    : seq_id(id),
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
