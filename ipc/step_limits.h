// The engine limits every step command stays inside (the engine fills them from its config),
// and the one check of a command against them. The executor sizes its buffers from the same
// limits at start-up (the ring's slots, the workspace, the logits rows and the sampling slots),
// so a command outside them is a bug on rank 0's side: ModelRunner refuses it through
// step_limit_violation, and the tests hold every internal command (the warm-up's too) to it.
#pragma once

#include <cstdint>
#include <string>

#include "ipc/step_command.h"

namespace nanovllm {

struct StepLimits {
  int max_num_batched_tokens = 0;
  int max_num_seqs = 0;
  int max_model_len = 0;
  int block_size = 0;
};

// The blocks one sequence of max_model_len tokens needs: ceil(max_model_len / block_size), the
// widest block table a command may carry (and what one sequence's share of the cache must hold).
int64_t max_blocks_per_seq(int64_t max_model_len, int64_t block_size);

// The most new tokens one step carries: the budget, but never more than max_num_seqs sequences
// of max_model_len tokens hold, and at least a decode of max_num_seqs rows.
int64_t max_step_tokens(const StepLimits& limits);

// Empty when `cmd` (a prefill or a decode) stays inside `limits`: at most max_step_tokens
// tokens, 1..max_num_seqs sequences, at most max_num_seqs sampled rows (sample_slots, each a
// slot id in [0, max_num_seqs), no more than the logits rows) and new slot parameters, contexts and
// positions within max_model_len, block tables at most ceil(max_model_len / block_size) wide and
// wide enough for each context, and the vectors' lengths consistent. Otherwise the first limit
// broken, naming the field and both numbers.
std::string step_limit_violation(const StepCommand& cmd, const StepLimits& limits);

}  // namespace nanovllm
