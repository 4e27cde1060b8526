// step_limit_violation: the limits ModelRunner holds every command to, each one caught with a
// message naming the field, and a command at every limit at once accepted.
#include "ipc/step_limits.h"

#include <gtest/gtest.h>

#include <string>

namespace nanovllm {
namespace {

constexpr StepLimits kLimits{/*max_num_batched_tokens=*/64, /*max_num_seqs=*/4,
                             /*max_model_len=*/40, /*block_size=*/16};

// Two sequences: 8 new of 40 tokens and 30 new of 30, both sampled, slots 2 and 3.
StepCommand valid_prefill() {
  StepCommand c;
  c.kind = StepKind::kPrefill;
  for (int p = 32; p < 40; ++p) c.positions.push_back(p);
  for (int p = 0; p < 30; ++p) c.positions.push_back(p);
  c.input_ids.assign(c.positions.size(), 7);
  c.slot_mapping.assign(c.positions.size(), -1);
  c.cu_seqlens_q = {0, 8, 38};
  c.cu_seqlens_k = {0, 40, 70};
  c.max_seqlen_q = 30;
  c.max_seqlen_k = 40;
  c.block_table_width = 3;
  c.block_tables.assign(6, 0);
  c.logits_indices = {7, 37};
  c.sample_slots = {2, 3};
  c.new_slot_params = {SlotSamplingParams{2}, SlotSamplingParams{3}};
  return c;
}

StepCommand valid_decode(int seqs) {
  StepCommand c;
  c.kind = StepKind::kDecode;
  for (int s = 0; s < seqs; ++s) {
    c.input_ids.push_back(1);
    c.positions.push_back(39);
    c.slot_mapping.push_back(s);
    c.context_lens.push_back(40);
    c.logits_indices.push_back(s);
    c.sample_slots.push_back(s);
  }
  c.block_table_width = 3;
  c.block_tables.assign(static_cast<size_t>(seqs) * 3, 0);
  return c;
}

void expect_violation(const StepCommand& c, const std::string& names) {
  const std::string message = step_limit_violation(c, kLimits);
  EXPECT_NE(message.find(names), std::string::npos) << "got: '" << message << "'";
}

TEST(StepLimits, MostTokensIsTheBudgetCappedBySequencesTimesMaxModelLen) {
  EXPECT_EQ(max_step_tokens(kLimits), 64);                            // the budget
  EXPECT_EQ(max_step_tokens(StepLimits{16384, 1, 4096, 256}), 4096);  // one sequence
  EXPECT_EQ(max_step_tokens(StepLimits{16384, 3, 4096, 256}), 12288);
  EXPECT_EQ(max_step_tokens(StepLimits{64, 128, 4096, 16}), 128);  // a decode of 128 rows
}

TEST(StepLimits, CommandsInsideEveryLimitPass) {
  EXPECT_EQ(step_limit_violation(valid_prefill(), kLimits), "");
  EXPECT_EQ(step_limit_violation(valid_decode(4), kLimits), "");
}

TEST(StepLimits, MoreSequencesOrSampledRowsThanMaxNumSeqsAreCaught) {
  expect_violation(valid_decode(5), "sequences 5 exceeds max_num_seqs 4");
  StepCommand c = valid_prefill();
  c.logits_indices = {0, 1, 2, 3, 7};
  c.sample_slots = {0, 1, 2, 3, 0};
  expect_violation(c, "sampled rows 5 exceeds max_num_seqs 4");
  c.sample_slots.clear();  // logits alone (the forward pass, no sampling) may have more rows
  EXPECT_EQ(step_limit_violation(c, kLimits), "");
}

TEST(StepLimits, SlotsOutsideTheSamplingStateAreCaught) {
  StepCommand c = valid_prefill();
  c.sample_slots = {2, 4};
  expect_violation(c, "sample_slots[1] 4 is outside [0, max_num_seqs 4)");
  c = valid_prefill();
  c.new_slot_params[0].slot = 4;
  expect_violation(c, "new slot parameters for slot 4");
  c = valid_prefill();
  c.sample_slots = {2, 3, 1};
  expect_violation(c, "sample_slots 3 exceeds logits rows 2");
}

TEST(StepLimits, TokensBeyondTheStepsMostAreCaught) {
  StepCommand c;
  c.kind = StepKind::kPrefill;
  for (int s = 0; s < 2; ++s)
    for (int p = 0; p < 40; ++p) c.positions.push_back(p);
  c.input_ids.assign(80, 0);
  c.slot_mapping.assign(80, -1);
  c.cu_seqlens_q = {0, 40, 80};
  c.cu_seqlens_k = {0, 40, 80};
  c.max_seqlen_q = c.max_seqlen_k = 40;
  c.block_table_width = 3;
  c.block_tables.assign(6, 0);
  expect_violation(c, "tokens 80 exceeds the step's most 64");
}

TEST(StepLimits, ContextsPositionsAndBlockTablesBeyondMaxModelLenAreCaught) {
  StepCommand c = valid_decode(2);
  c.context_lens[1] = 41;
  expect_violation(c, "sequence 1's context 41 is outside [1, max_model_len 40]");
  c = valid_decode(2);
  c.positions[0] = 40;
  expect_violation(c, "positions[0] 40 is outside [0, max_model_len 40)");
  c = valid_decode(2);
  c.block_table_width = 4;
  c.block_tables.assign(8, 0);
  expect_violation(c, "block_table_width 4 exceeds ceil(max_model_len / block_size) 3");
  c = valid_decode(2);
  c.block_table_width = 2;
  c.block_tables.assign(4, 0);
  expect_violation(c, "a context 40 exceeds block_table_width x block_size 32");
}

TEST(StepLimits, InconsistentLengthsAreCaught) {
  StepCommand c = valid_prefill();
  c.slot_mapping.pop_back();
  expect_violation(c, "slot_mapping entries 37 != tokens 38");
  c = valid_prefill();
  c.cu_seqlens_q = {0, 8, 37};
  expect_violation(c, "cu_seqlens_q's last entry 37 != tokens 38");
  c = valid_prefill();
  c.logits_indices[1] = 38;
  expect_violation(c, "logits_indices[1] 38 is outside [0, tokens 38)");
  c = valid_prefill();
  c.max_seqlen_q = 8;
  expect_violation(c, "sequence 1: 30 new of 30 tokens, max_seqlen_q 8");
  EXPECT_EQ(step_limit_violation(StepCommand{}, kLimits), "not a prefill or decode command");
}

}  // namespace
}  // namespace nanovllm
