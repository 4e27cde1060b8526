// What the engine loop needs from a model: one forward pass over a scheduled batch, one
// sampled token per sequence. The rank/ model runner implements it (prepare the step
// command, broadcast it in tensor-parallel runs, execute, sample); tests use fakes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sequence.h"

namespace nanovllm {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // seqs: the scheduler's batch, in order. Prefill computes tokens
  // [num_cached_tokens, num_tokens) of each sequence; decode computes its last token.
  // Returns the next token of each sequence, in the same order.
  virtual std::vector<int32_t> run(std::span<Sequence* const> seqs, bool is_prefill) = 0;
};

}  // namespace nanovllm
