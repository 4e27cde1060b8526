#include "engine/step_builder.h"

#include <gtest/gtest.h>

#include "kernels/check.h"

namespace nanovllm {
namespace {

using V = std::vector<int32_t>;

// block_size 4. A: 10 tokens, first block (4 tokens) from the prefix cache, blocks {7, 2, 9}.
// B: 3 tokens, nothing cached, block {5}.
struct Batch {
  Sequence a{11, {100, 101, 102, 103, 104, 105, 106, 107, 108, 109}, SamplingParams{}, 4};
  Sequence b{12, {200, 201, 202}, SamplingParams{}, 4};
  Batch() {
    a.num_cached_tokens = a.num_computed_tokens = 4;
    a.block_table = {7, 2, 9};
    a.sampling_params.seed = 123;
    a.sampling_params.temperature = 0.5f;
    a.sampling_params.top_k = 20;
    a.sampling_params.top_p = 0.9f;
    a.sampling_params.min_p = 0.05f;
    b.block_table = {5};
    b.sampling_params.seed = default_sequence_seed(b.seq_id);  // what LLMEngine resolves
    b.sampling_params.temperature = 0.0f;
  }
};

TEST(StepBuilder, PrefillSkipsCachedPrefixAndMapsSlotsThroughBlockTable) {
  Batch batch;
  Sequence* seqs[] = {&batch.a, &batch.b};
  SamplingSlots slots(4);
  const StepCommand cmd = build_prefill_command(seqs, 4, slots, {});
  EXPECT_EQ(cmd.kind, StepKind::kPrefill);
  EXPECT_EQ(cmd.input_ids, (V{104, 105, 106, 107, 108, 109, 200, 201, 202}));
  EXPECT_EQ(cmd.positions, (V{4, 5, 6, 7, 8, 9, 0, 1, 2}));
  // token 4 -> block 2 row 0 = 8; token 8 -> block 9 row 0 = 36; B's tokens -> block 5.
  EXPECT_EQ(cmd.slot_mapping, (V{8, 9, 10, 11, 36, 37, 20, 21, 22}));
  EXPECT_EQ(cmd.cu_seqlens_q, (V{0, 6, 9}));
  EXPECT_EQ(cmd.cu_seqlens_k, (V{0, 10, 13}));
  EXPECT_EQ(cmd.max_seqlen_q, 6);
  EXPECT_EQ(cmd.max_seqlen_k, 10);
  EXPECT_EQ(cmd.block_table_width, 3);
  EXPECT_EQ(cmd.block_tables, (V{7, 2, 9, 5, -1, -1}));
  EXPECT_EQ(cmd.logits_indices, (V{5, 8}));
  // The sampled token's number: its row's position + 1 (num_tokens of the sequence).
  EXPECT_EQ(cmd.positions[cmd.logits_indices[0]] + 1, 10);
  EXPECT_EQ(cmd.positions[cmd.logits_indices[1]] + 1, 3);
  // Both sequences are new to a slot: the lowest free ones, in batch order, params sent.
  EXPECT_EQ(cmd.sample_slots, (V{0, 1}));
  EXPECT_EQ(batch.a.sampling_slot, 0);
  EXPECT_EQ(batch.b.sampling_slot, 1);
  ASSERT_EQ(cmd.new_slot_params.size(), 2u);
  const SlotSamplingParams& pa = cmd.new_slot_params[0];
  EXPECT_EQ(pa.slot, 0);
  EXPECT_EQ(pa.temperature, 0.5f);
  EXPECT_EQ(pa.top_k, 20);
  EXPECT_EQ(pa.top_p, 0.9f);
  EXPECT_EQ(pa.min_p, 0.05f);
  EXPECT_EQ(pa.seed, 123u);
  const SlotSamplingParams& pb = cmd.new_slot_params[1];
  EXPECT_EQ(pb.slot, 1);
  EXPECT_EQ(pb.temperature, 0.0f);
  EXPECT_EQ(pb.top_k, -1);
  EXPECT_EQ(pb.top_p, 1.0f);
  EXPECT_EQ(pb.min_p, 0.0f);
  EXPECT_EQ(pb.seed, default_sequence_seed(12));
  EXPECT_EQ(slots.num_free(), 2);
  EXPECT_EQ(cmd.num_seqs(), 2);
}

TEST(StepBuilder, DecodeTakesLastTokenAndItsSlot) {
  Batch batch;
  batch.a.append_token(110);  // token index 10 -> block 9 (third), row 2 -> slot 38
  batch.b.append_token(203);  // token index 3 -> block 5, row 3 -> slot 23
  batch.a.sampling_slot = 3;  // taken at their prefill
  batch.b.sampling_slot = 1;
  Sequence* seqs[] = {&batch.a, &batch.b};
  const StepCommand cmd = build_decode_command(seqs, 4);
  EXPECT_EQ(cmd.kind, StepKind::kDecode);
  EXPECT_EQ(cmd.input_ids, (V{110, 203}));
  EXPECT_EQ(cmd.positions, (V{10, 3}));
  EXPECT_EQ(cmd.slot_mapping, (V{38, 23}));
  EXPECT_EQ(cmd.context_lens, (V{11, 4}));
  EXPECT_EQ(cmd.block_tables, (V{7, 2, 9, 5, -1, -1}));
  EXPECT_EQ(cmd.logits_indices, (V{0, 1}));
  EXPECT_EQ(cmd.positions[0] + 1, 11);  // the sampled token's number
  EXPECT_EQ(cmd.positions[1] + 1, 4);
  EXPECT_EQ(cmd.sample_slots, (V{3, 1}));
  EXPECT_TRUE(cmd.new_slot_params.empty());  // parameters travel at prefill only
  EXPECT_EQ(cmd.num_seqs(), 2);
}

TEST(StepBuilder, DecodeOfASequenceWithoutASlotIsABug) {
  Batch batch;
  batch.a.append_token(110);
  batch.a.sampling_slot = 0;
  Sequence* seqs[] = {&batch.a, &batch.b};  // b never prefilled: no slot
  EXPECT_THROW(build_decode_command(seqs, 4), CheckError);
}

// One sequence of `len` tokens in fresh blocks from `first_block`, seed = 1000 + id.
Sequence make_seq(int64_t id, int len, int32_t first_block) {
  SamplingParams p;
  p.seed = 1000 + static_cast<uint64_t>(id);
  p.temperature = 0.1f * static_cast<float>(id);
  Sequence s(id, std::vector<int32_t>(static_cast<size_t>(len), 9), p, 4);
  for (int b = 0; b < s.num_blocks() + 1; ++b) s.block_table.push_back(first_block + b);
  return s;
}

std::vector<int32_t> filled_slots(const StepCommand& cmd) {
  std::vector<int32_t> out;
  for (const SlotSamplingParams& p : cmd.new_slot_params) out.push_back(p.slot);
  return out;
}

TEST(StepBuilder, SlotsAreTakenLowestFirstAndParamsSentOncePerSlot) {
  SamplingSlots slots(3);
  Sequence a = make_seq(1, 3, 0), b = make_seq(2, 5, 10), c = make_seq(3, 2, 20);
  Sequence* first[] = {&a, &b};
  const StepCommand p1 = build_prefill_command(first, 4, slots, {});
  EXPECT_EQ(p1.sample_slots, (V{0, 1}));
  EXPECT_EQ(filled_slots(p1), (V{0, 1}));
  a.append_token(1);
  b.append_token(1);
  // A later prefill joins the running ones: only the newcomer's parameters travel.
  Sequence* second[] = {&c};
  const StepCommand p2 = build_prefill_command(second, 4, slots, {});
  EXPECT_EQ(p2.sample_slots, (V{2}));
  ASSERT_EQ(p2.new_slot_params.size(), 1u);
  EXPECT_EQ(p2.new_slot_params[0].slot, 2);
  EXPECT_EQ(p2.new_slot_params[0].seed, 1003u);
  EXPECT_EQ(p2.new_slot_params[0].temperature, c.sampling_params.temperature);
  c.append_token(1);
  // Decode steps name every slot and send no parameters, however many there are.
  Sequence* all[] = {&a, &b, &c};
  for (int step = 0; step < 3; ++step) {
    const StepCommand d = build_decode_command(all, 4);
    EXPECT_EQ(d.sample_slots, (V{0, 1, 2}));
    EXPECT_TRUE(d.new_slot_params.empty());
    for (Sequence* s : all) s->append_token(1);
  }
  EXPECT_EQ(slots.num_free(), 0);
}

TEST(StepBuilder, FinishedSequencesSlotIsReusedByTheNextPrefillWithItsParamsResent) {
  SamplingSlots slots(3);
  Sequence a = make_seq(1, 3, 0), b = make_seq(2, 5, 10), c = make_seq(3, 2, 20);
  Sequence* first[] = {&a, &b};
  build_prefill_command(first, 4, slots, {});
  // a finishes: the engine gives its slot back (LLMEngine does this after postprocess).
  slots.release(a.sampling_slot);
  a.sampling_slot = -1;
  Sequence* next[] = {&c};
  const StepCommand p = build_prefill_command(next, 4, slots, {});
  EXPECT_EQ(p.sample_slots, (V{0}));  // a's slot, the lowest free one
  ASSERT_EQ(p.new_slot_params.size(), 1u);
  EXPECT_EQ(p.new_slot_params[0].slot, 0);
  EXPECT_EQ(p.new_slot_params[0].seed, 1003u);  // c's parameters, not a's
  b.append_token(1);
  c.append_token(1);
  Sequence* running[] = {&b, &c};
  EXPECT_EQ(build_decode_command(running, 4).sample_slots, (V{1, 0}));
}

TEST(StepBuilder, PreemptedSequenceGetsASlotAndItsParamsAgainAtRecompute) {
  SamplingSlots slots(2);
  Sequence a = make_seq(1, 3, 0), b = make_seq(2, 5, 10);
  Sequence* both[] = {&a, &b};
  build_prefill_command(both, 4, slots, {});
  a.append_token(1);
  b.append_token(1);
  // b is preempted (the engine gives its slot back right after schedule()); a runs on.
  slots.release(b.sampling_slot);
  b.sampling_slot = -1;
  Sequence* only_a[] = {&a};
  EXPECT_TRUE(build_decode_command(only_a, 4).new_slot_params.empty());
  a.append_token(1);
  // Its recompute prefill covers prompt and completion: a slot again, its parameters again.
  Sequence* recompute[] = {&b};
  const StepCommand p = build_prefill_command(recompute, 4, slots, {});
  EXPECT_EQ(p.sample_slots, (V{1}));
  ASSERT_EQ(p.new_slot_params.size(), 1u);
  EXPECT_EQ(p.new_slot_params[0].slot, 1);
  EXPECT_EQ(p.new_slot_params[0].seed, 1002u);
  EXPECT_EQ(p.new_slot_params[0].temperature, b.sampling_params.temperature);
  EXPECT_EQ(p.positions[p.logits_indices[0]] + 1, 6);  // samples its 7th token
}

TEST(StepBuilder, MinTokensMasksEosAndStopIdsUntilPromptPlusMinTokens) {
  const int32_t eos[] = {151645, 151643};
  SamplingSlots slots(4);
  // a: 3-token prompt, min_tokens 5, a stop id repeating an eos id (sent once);
  // b: ignore_eos, so only its stop ids; c: min_tokens 0 (nothing masked, whatever its stops).
  Sequence a = make_seq(1, 3, 0), b = make_seq(2, 6, 10), c = make_seq(3, 2, 20);
  a.sampling_params.min_tokens = 5;
  a.sampling_params.stop_token_ids = {13, 151643, 198};
  b.sampling_params.min_tokens = 1;
  b.sampling_params.ignore_eos = true;
  b.sampling_params.stop_token_ids = {42};
  c.sampling_params.stop_token_ids = {7};
  Sequence* seqs[] = {&a, &b, &c};
  const StepCommand p = build_prefill_command(seqs, 4, slots, eos);
  ASSERT_EQ(p.new_slot_params.size(), 3u);
  EXPECT_EQ(p.new_slot_params[0].min_tokens_position, 3 + 5);
  EXPECT_EQ(p.new_slot_params[0].min_tokens_masked_ids, (V{151645, 151643, 13, 198}));
  EXPECT_EQ(p.new_slot_params[1].min_tokens_position, 6 + 1);
  EXPECT_EQ(p.new_slot_params[1].min_tokens_masked_ids, (V{42}));
  EXPECT_EQ(p.new_slot_params[2].min_tokens_position, 0);
  EXPECT_TRUE(p.new_slot_params[2].min_tokens_masked_ids.empty());
  // a's row samples its first completion token (position 3): masked, as positions up to 7 are.
  EXPECT_LT(p.positions[p.logits_indices[0]] + 1, p.new_slot_params[0].min_tokens_position);
}

TEST(StepBuilder, MinTokensPositionCountsFromThePromptAtARecomputePrefill) {
  // Preempted after 2 completion tokens: the recompute prefill covers 5 tokens, but the mask
  // still ends at prompt + min_tokens (its 4th completion token may be eos).
  const int32_t eos[] = {2};
  SamplingSlots slots(1);
  Sequence a = make_seq(1, 3, 0);
  a.sampling_params.min_tokens = 4;
  a.append_token(5);
  a.append_token(6);
  Sequence* seqs[] = {&a};
  const StepCommand p = build_prefill_command(seqs, 4, slots, eos);
  ASSERT_EQ(p.new_slot_params.size(), 1u);
  EXPECT_EQ(p.new_slot_params[0].min_tokens_position, 7);
  EXPECT_EQ(p.new_slot_params[0].min_tokens_masked_ids, (V{2}));
}

TEST(StepBuilder, MoreMaskedIdsThanTheCommandCarriesIsABug) {
  std::vector<int32_t> eos;
  for (int32_t i = 0; i < 17; ++i) eos.push_back(1000 + i);
  SamplingSlots slots(1);
  Sequence a = make_seq(1, 3, 0);
  a.sampling_params.min_tokens = 1;
  for (int32_t i = 0; i < 32; ++i) a.sampling_params.stop_token_ids.push_back(i);
  Sequence* seqs[] = {&a};
  EXPECT_THROW(build_prefill_command(seqs, 4, slots, eos), CheckError);  // 49 > 48
  EXPECT_EQ(slots.num_free(), 1);       // checked before a slot is taken
  a.sampling_params.ignore_eos = true;  // 32 stop ids alone fit
  EXPECT_EQ(
      build_prefill_command(seqs, 4, slots, eos).new_slot_params.at(0).min_tokens_masked_ids.size(),
      32u);
}

TEST(StepBuilder, DefaultSeedIsDeterministicPerSequenceAndDiffersAcrossSequences) {
  EXPECT_EQ(default_sequence_seed(1), default_sequence_seed(1));
  EXPECT_NE(default_sequence_seed(1), default_sequence_seed(2));
}

TEST(StepBuilder, ASequenceWithoutAResolvedSeedIsABug) {
  Sequence x(1, {1}, SamplingParams{}, 4);
  x.block_table = {0};
  Sequence* seqs[] = {&x};
  SamplingSlots slots(1);
  EXPECT_THROW(build_prefill_command(seqs, 4, slots, {}), std::exception);
  EXPECT_EQ(slots.num_free(), 1);  // checked before a slot is taken
}

TEST(StepBuilder, PenalizedSlotCarriesItsTokenStateBiasAndLogprobs) {
  // A recompute prefill after 4 generated tokens: the prompt bits (repetition penalty on) and
  // the generated counts, each id once, ascending; a repeated prompt token is one entry.
  Sequence s{21, {30, 31, 30, 32}, SamplingParams{}, 4};
  s.sampling_params.seed = 1;
  s.sampling_params.repetition_penalty = 1.2f;
  s.sampling_params.frequency_penalty = 0.5f;
  s.sampling_params.logit_bias = {{3, -100.0f}, {40, 2.5f}};
  s.sampling_params.logprobs = 5;
  for (const int32_t t : {32, 7, 7, 9}) s.append_token(t);
  s.block_table = {1, 2};
  Sequence* seqs[] = {&s};
  SamplingSlots slots(2);
  const StepCommand cmd = build_prefill_command(seqs, 4, slots, {});
  ASSERT_EQ(cmd.new_slot_params.size(), 1u);
  const SlotSamplingParams& p = cmd.new_slot_params[0];
  EXPECT_EQ(p.repetition_penalty, 1.2f);
  EXPECT_EQ(p.presence_penalty, 0.0f);
  EXPECT_EQ(p.frequency_penalty, 0.5f);
  EXPECT_EQ(p.token_state_ids, (V{7, 9, 30, 31, 32}));
  EXPECT_EQ(p.token_state_values,
            (std::vector<uint16_t>{2, 1, kTokenStateInPrompt, kTokenStateInPrompt,
                                   static_cast<uint16_t>(kTokenStateInPrompt | 1)}));
  EXPECT_EQ(p.logit_bias_ids, (V{3, 40}));
  EXPECT_EQ(p.logit_bias_values, (std::vector<float>{-100.0f, 2.5f}));
  EXPECT_EQ(p.num_logprobs, 5);
  EXPECT_TRUE(cmd.sample_logprobs);
  EXPECT_TRUE(cmd.prompt_logprobs_indices.empty());
  // Without repetition penalty the prompt is not sent: only generated tokens count.
  Sequence q{22, {30, 31}, SamplingParams{}, 4};
  q.sampling_params.seed = 2;
  q.sampling_params.presence_penalty = -1.0f;
  q.append_token(31);
  q.block_table = {3};
  Sequence* qs[] = {&q};
  const StepCommand qc = build_prefill_command(qs, 4, slots, {});
  ASSERT_EQ(qc.new_slot_params.size(), 1u);
  EXPECT_EQ(qc.new_slot_params[0].token_state_ids, (V{31}));
  EXPECT_EQ(qc.new_slot_params[0].token_state_values, (std::vector<uint16_t>{1}));
  EXPECT_EQ(qc.new_slot_params[0].num_logprobs, -1);
  EXPECT_FALSE(qc.sample_logprobs);
}

TEST(StepBuilder, PromptLogprobsRowsTargetTheNextPromptTokenOncePerChunk) {
  // A 7-token prompt in chunks [0, 4) and [4, 7): rows 0..3 then 4, 5 (row 6 samples), each
  // row's target the prompt token after it.
  Sequence s{31, {50, 51, 52, 53, 54, 55, 56}, SamplingParams{}, 4};
  s.sampling_params.seed = 1;
  s.sampling_params.prompt_logprobs = 2;
  s.block_table = {4, 6};
  Sequence* seqs[] = {&s};
  SamplingSlots slots(2);
  const int first[] = {4};
  const StepCommand c1 = build_prefill_command(seqs, first, 4, slots, {});
  EXPECT_EQ(c1.prompt_logprobs_indices, (V{0, 1, 2, 3}));
  EXPECT_EQ(c1.prompt_logprobs_targets, (V{51, 52, 53, 54}));
  EXPECT_EQ(c1.prompt_logprobs_num_top, (V{2, 2, 2, 2}));
  EXPECT_TRUE(c1.logits_indices.empty());
  s.num_computed_tokens = 4;
  for (int i = 0; i < 4; ++i) s.prompt_logprobs.emplace_back();
  const StepCommand c2 = build_prefill_command(seqs, 4, slots, {});
  EXPECT_EQ(c2.prompt_logprobs_indices, (V{0, 1}));  // rows of positions 4 and 5
  EXPECT_EQ(c2.prompt_logprobs_targets, (V{55, 56}));
  EXPECT_EQ(c2.logits_indices, (V{2}));
  // Owed entries all in (a recompute after preemption): no rows.
  for (int i = 0; i < 2; ++i) s.prompt_logprobs.emplace_back();
  s.num_computed_tokens = 0;
  s.sampling_slot = -1;
  EXPECT_TRUE(build_prefill_command(seqs, 4, slots, {}).prompt_logprobs_indices.empty());
}

}  // namespace
}  // namespace nanovllm
