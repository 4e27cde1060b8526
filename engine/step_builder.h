// Rank 0 turns the scheduler's batch into the StepCommand every rank executes (nano-vllm's
// ModelRunner.prepare_prefill / prepare_decode / prepare_block_tables / prepare_sample, moved
// to the engine side: the command is the engine's output, the workers only execute it).
#pragma once

#include <cstdint>
#include <span>

#include "engine/engine_config.h"
#include "engine/sampling_slots.h"
#include "engine/sequence.h"
#include "ipc/step_command.h"
#include "ipc/step_ring_sizing.h"

namespace nanovllm {

// Prefill (varlen rows): the tokens [num_computed_tokens, + num_scheduled_tokens[b]) of each
// sequence (a chunk, the rest of a prompt, or one decode token in a mixed step). A row that
// reaches num_tokens() samples (one logits row, its last token); a sampling row without a
// sampling slot takes the lowest free one from `slots` and its parameters go into
// new_slot_params (its seed must be resolved: CHECK). With min_tokens > 0 they carry its
// min_tokens mask: min_tokens_position = num_prompt_tokens + min_tokens, masked ids =
// eos_token_ids (the engine's; none when ignore_eos) then its stop_token_ids, each id once
// (more than kMaxMinTokensMaskedIds: CHECK); with penalties the sequence's token state
// (prompt bits when repetition_penalty != 1, generated counts), its logit_bias and logprobs.
// Rows in prompt_logprobs_rows() get a prompt_logprobs row; sample_logprobs is set when a
// sampled sequence asks for logprobs.
StepCommand build_prefill_command(std::span<Sequence* const> seqs,
                                  std::span<const int> num_scheduled_tokens, int block_size,
                                  SamplingSlots& slots, std::span<const int32_t> eos_token_ids);
// The same with every sequence computing all its tokens from num_computed_tokens.
StepCommand build_prefill_command(std::span<Sequence* const> seqs, int block_size,
                                  SamplingSlots& slots, std::span<const int32_t> eos_token_ids);
// Positions [begin, end) of a sequence's tokens whose rows give prompt_logprobs entries: of
// the tokens [start, end) a step computes, those whose next token is in the prompt and whose
// entry is still owed (Sequence::owes_prompt_logprobs); an empty range otherwise. The row at
// position t gives entry t (prompt token t + 1).
struct PositionRange {
  int begin = 0, end = 0;
};
PositionRange prompt_logprobs_rows(const Sequence& seq, int start, int end);

// Decode: the last token of each sequence, or its pending one (kPendingInputToken, at the
// position after its last). Each one holds a sampling slot since its prefill (CHECK); no
// parameters travel.
StepCommand build_decode_command(std::span<Sequence* const> seqs, int block_size);

// The seed of a sequence whose request named none and whose caller derived none: a fixed mix
// of its seq_id (splitmix64), so a run without seeds is still reproducible. LLMEngine resolves
// every request's seed with it once, at add_request.
uint64_t default_sequence_seed(int64_t seq_id);

// The limits that size the ring's slots (ipc/step_ring_sizing.h).
StepLimits step_limits(const EngineConfig& config);

}  // namespace nanovllm
