#include "engine/step_builder.h"

#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/check.h"

namespace nanovllm {

static_assert(kMaxLogitBias <= kMaxSlotLogitBias);
static_assert(kMaxLogprobs <= kMaxSlotLogprobs);

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int32_t slot_of(const Sequence& seq, int token, int block_size) {
  const size_t block = static_cast<size_t>(token / block_size);
  CHECK_MSG(block < seq.block_table.size(),
            "seq " << seq.seq_id << " has no block for token " << token);
  return seq.block_table[block] * block_size + token % block_size;
}

// Block tables padded with -1 to the widest one.
void fill_block_tables(StepCommand& cmd, std::span<Sequence* const> seqs) {
  size_t width = 0;
  for (const Sequence* s : seqs) width = std::max(width, s->block_table.size());
  cmd.block_table_width = static_cast<int32_t>(width);
  cmd.block_tables.assign(seqs.size() * width, -1);
  for (size_t b = 0; b < seqs.size(); ++b)
    std::copy(seqs[b]->block_table.begin(), seqs[b]->block_table.end(),
              cmd.block_tables.begin() + static_cast<std::ptrdiff_t>(b * width));
}

// The ids min_tokens keeps from being sampled: eos (unless ignore_eos), then stop_token_ids,
// each once.
std::vector<int32_t> min_tokens_masked_ids(const Sequence& seq,
                                           std::span<const int32_t> eos_token_ids) {
  const SamplingParams& p = seq.sampling_params;
  std::vector<int32_t> ids;
  const auto add = [&](int32_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (!p.ignore_eos)
    for (const int32_t id : eos_token_ids) add(id);
  for (const int32_t id : p.stop_token_ids) add(id);
  CHECK_MSG(ids.size() <= static_cast<size_t>(kMaxMinTokensMaskedIds),
            "seq " << seq.seq_id << " masks " << ids.size() << " eos / stop token ids until "
                   << "min_tokens, more than " << kMaxMinTokensMaskedIds);
  return ids;
}

// A penalized sequence's token state: each distinct id of its tokens once, with the prompt bit
// (repetition penalty only) and the times it was generated so far (a recompute after
// preemption has some), ascending by id.
void fill_token_state(SlotSamplingParams& slot, const Sequence& seq) {
  std::unordered_map<int32_t, uint16_t> state;
  if (seq.sampling_params.repetition_penalty != 1.0f)
    for (const int32_t id : seq.prompt_token_ids()) state[id] = kTokenStateInPrompt;
  for (const int32_t id : seq.completion_token_ids()) {
    uint16_t& s = state[id];
    if ((s & kTokenStateCountMax) < kTokenStateCountMax) ++s;
  }
  std::vector<std::pair<int32_t, uint16_t>> sorted(state.begin(), state.end());
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [id, value] : sorted) {
    slot.token_state_ids.push_back(id);
    slot.token_state_values.push_back(value);
  }
}

// A sequence new to a slot: take the lowest free one and send its parameters once (rank 0's
// sampler keeps them until the slot is refilled).
void assign_sampling_slot(StepCommand& cmd, Sequence& seq, SamplingSlots& slots,
                          std::span<const int32_t> eos_token_ids) {
  const SamplingParams& p = seq.sampling_params;
  CHECK_MSG(p.seed.has_value(), "seq " << seq.seq_id << " has no resolved seed");
  SlotSamplingParams slot{-1, p.temperature, p.top_k, p.top_p, p.min_p, *p.seed};
  if (p.min_tokens > 0) {
    slot.min_tokens_position = seq.num_prompt_tokens + p.min_tokens;
    slot.min_tokens_masked_ids = min_tokens_masked_ids(seq, eos_token_ids);
  }
  slot.repetition_penalty = p.repetition_penalty;
  slot.presence_penalty = p.presence_penalty;
  slot.frequency_penalty = p.frequency_penalty;
  if (p.penalized()) fill_token_state(slot, seq);
  CHECK_LE(p.logit_bias.size(), static_cast<size_t>(kMaxSlotLogitBias));
  for (const auto& [id, bias] : p.logit_bias) {
    slot.logit_bias_ids.push_back(id);
    slot.logit_bias_values.push_back(bias);
  }
  slot.num_logprobs = p.logprobs.value_or(-1);
  seq.sampling_slot = slot.slot = slots.acquire();
  cmd.new_slot_params.push_back(std::move(slot));
}

}  // namespace

PositionRange prompt_logprobs_rows(const Sequence& seq, int start, int end) {
  if (!seq.owes_prompt_logprobs()) return {};
  const int begin = std::max(start, static_cast<int>(seq.prompt_logprobs.size()));
  return {begin, std::max(begin, std::min(end, seq.num_prompt_tokens - 1))};
}

uint64_t default_sequence_seed(int64_t seq_id) {
  return splitmix64(static_cast<uint64_t>(seq_id));
}

StepLimits step_limits(const EngineConfig& config) {
  return StepLimits{config.max_num_batched_tokens, config.max_num_seqs, config.max_model_len,
                    config.kvcache_block_size};
}

StepCommand build_prefill_command(std::span<Sequence* const> seqs,
                                  std::span<const int> num_scheduled_tokens, int block_size,
                                  SamplingSlots& slots, std::span<const int32_t> eos_token_ids) {
  CHECK_EQ(seqs.size(), num_scheduled_tokens.size());
  StepCommand cmd;
  cmd.kind = StepKind::kPrefill;
  cmd.cu_seqlens_q.push_back(0);
  cmd.cu_seqlens_k.push_back(0);
  for (size_t b = 0; b < seqs.size(); ++b) {
    Sequence* s = seqs[b];
    const int start = s->num_computed_tokens, end = start + num_scheduled_tokens[b];
    CHECK_MSG(start < end && end <= s->num_tokens(), "seq " << s->seq_id << " schedules tokens ["
                                                            << start << ", " << end << ") of "
                                                            << s->num_tokens());
    for (int t = start; t < end; ++t) {
      cmd.input_ids.push_back(s->token_ids[t]);
      cmd.positions.push_back(t);
      cmd.slot_mapping.push_back(slot_of(*s, t, block_size));
    }
    cmd.cu_seqlens_q.push_back(cmd.cu_seqlens_q.back() + (end - start));
    cmd.cu_seqlens_k.push_back(cmd.cu_seqlens_k.back() + end);
    cmd.max_seqlen_q = std::max(cmd.max_seqlen_q, end - start);
    cmd.max_seqlen_k = std::max(cmd.max_seqlen_k, end);
    const PositionRange owed = prompt_logprobs_rows(*s, start, end);
    for (int t = owed.begin; t < owed.end; ++t) {
      cmd.prompt_logprobs_indices.push_back(cmd.cu_seqlens_q[b] + (t - start));
      cmd.prompt_logprobs_targets.push_back(s->token_ids[t + 1]);
      cmd.prompt_logprobs_num_top.push_back(*s->sampling_params.prompt_logprobs);
    }
    if (end < s->num_tokens()) continue;  // a chunk short of the prompt's end samples nothing
    cmd.logits_indices.push_back(cmd.cu_seqlens_q.back() - 1);
    if (s->sampling_slot < 0) assign_sampling_slot(cmd, *s, slots, eos_token_ids);
    cmd.sample_slots.push_back(s->sampling_slot);
    cmd.sample_logprobs = cmd.sample_logprobs || s->sampling_params.logprobs.has_value();
  }
  fill_block_tables(cmd, seqs);
  return cmd;
}

StepCommand build_prefill_command(std::span<Sequence* const> seqs, int block_size,
                                  SamplingSlots& slots, std::span<const int32_t> eos_token_ids) {
  std::vector<int> counts;  // [B]
  for (const Sequence* s : seqs) counts.push_back(s->num_tokens() - s->num_computed_tokens);
  return build_prefill_command(seqs, counts, block_size, slots, eos_token_ids);
}

StepCommand build_decode_command(std::span<Sequence* const> seqs, int block_size) {
  StepCommand cmd;
  cmd.kind = StepKind::kDecode;
  for (size_t b = 0; b < seqs.size(); ++b) {
    const Sequence& s = *seqs[b];
    // A pending token (async scheduling) is the input; the device knows it, the host not yet.
    const int last = s.num_tokens() - 1 + s.num_pending_tokens;
    cmd.input_ids.push_back(s.num_pending_tokens > 0 ? kPendingInputToken : s.last_token);
    cmd.positions.push_back(last);
    cmd.slot_mapping.push_back(slot_of(s, last, block_size));
    cmd.context_lens.push_back(last + 1);
    cmd.logits_indices.push_back(static_cast<int32_t>(b));
    CHECK_MSG(s.sampling_slot >= 0, "decoding seq " << s.seq_id << " holds no sampling slot");
    cmd.sample_slots.push_back(s.sampling_slot);
    cmd.sample_logprobs = cmd.sample_logprobs || s.sampling_params.logprobs.has_value();
  }
  fill_block_tables(cmd, seqs);
  return cmd;
}

}  // namespace nanovllm
