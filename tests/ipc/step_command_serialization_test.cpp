// StepCommand through Boost.Serialization: random contents survive the round trip field by
// field, alone and through the ring; bytes that do not decode are a clean CHECK failure.
#include "ipc/step_command_serialization.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <utility>

#include "ipc/broadcast_ring.h"
#include "ipc/step_ring_sizing.h"
#include "kernels/check.h"
#include "tests/ipc/local_command_ring.h"

namespace nanovllm {
namespace {

template <typename T, typename Rng>
std::vector<T> random_vector(Rng& rng, size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng());
  return v;
}

StepCommand random_command(uint32_t seed) {
  std::mt19937_64 rng(seed);
  StepCommand c;
  c.kind = static_cast<StepKind>(rng() % 3);
  c.step_id = rng();
  const size_t t = rng() % 300, b = 1 + rng() % 20, s = rng() % 20;
  c.input_ids = random_vector<int32_t>(rng, t);
  c.positions = random_vector<int32_t>(rng, t);
  c.slot_mapping = random_vector<int32_t>(rng, t);
  c.cu_seqlens_q = random_vector<int32_t>(rng, b + 1);
  c.cu_seqlens_k = random_vector<int32_t>(rng, b + 1);
  c.max_seqlen_q = static_cast<int32_t>(rng());
  c.max_seqlen_k = static_cast<int32_t>(rng());
  c.context_lens = random_vector<int32_t>(rng, b);
  c.block_table_width = static_cast<int32_t>(rng() % 9);
  c.block_tables = random_vector<int32_t>(rng, b * c.block_table_width);
  c.logits_indices = random_vector<int32_t>(rng, s);
  c.prompt_logprobs_indices = random_vector<int32_t>(rng, rng() % 2 == 0 ? 0 : t);
  c.sample_slots = random_vector<int32_t>(rng, s);
  for (size_t i = rng() % 4; i > 0; --i)
    c.new_slot_params.push_back(SlotSamplingParams{
        static_cast<int32_t>(rng() % 64), static_cast<float>(rng() % 100) / 50.0f,
        static_cast<int32_t>(rng() % 100), static_cast<float>(rng() % 100) / 99.0f,
        static_cast<float>(rng() % 10) / 20.0f, rng()});
  c.sample_from_shards = rng() % 2 == 0;
  c.eager = rng() % 2 == 0;
  return c;
}

// The six fields of a slot's parameters that reach the workers.
void expect_same_travelling(const SlotSamplingParams& a, const SlotSamplingParams& b) {
  EXPECT_EQ(a.slot, b.slot);
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.top_p, b.top_p);
  EXPECT_EQ(a.min_p, b.min_p);
  EXPECT_EQ(a.seed, b.seed);
}

void expect_same(const StepCommand& a, const StepCommand& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.step_id, b.step_id);
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.slot_mapping, b.slot_mapping);
  EXPECT_EQ(a.cu_seqlens_q, b.cu_seqlens_q);
  EXPECT_EQ(a.cu_seqlens_k, b.cu_seqlens_k);
  EXPECT_EQ(a.max_seqlen_q, b.max_seqlen_q);
  EXPECT_EQ(a.max_seqlen_k, b.max_seqlen_k);
  EXPECT_EQ(a.context_lens, b.context_lens);
  EXPECT_EQ(a.block_tables, b.block_tables);
  EXPECT_EQ(a.block_table_width, b.block_table_width);
  EXPECT_EQ(a.logits_indices, b.logits_indices);
  EXPECT_EQ(a.prompt_logprobs_indices, b.prompt_logprobs_indices);
  EXPECT_EQ(a.sample_slots, b.sample_slots);
  ASSERT_EQ(a.new_slot_params.size(), b.new_slot_params.size());
  for (size_t i = 0; i < a.new_slot_params.size(); ++i)
    expect_same_travelling(a.new_slot_params[i], b.new_slot_params[i]);
  EXPECT_EQ(a.sample_from_shards, b.sample_from_shards);
  EXPECT_EQ(a.eager, b.eager);
}

TEST(StepCommandSerialization, RandomCommandsRoundTripFieldByField) {
  for (uint32_t seed = 0; seed < 50; ++seed) {
    const StepCommand c = random_command(seed);
    expect_same(decode_step_command(encode_step_command(c)), c);
  }
}

// A command with rank 0's sampling fields filled the way a prefill of penalized, biased,
// logprobs-asking sequences fills them.
StepCommand with_rank0_sampling_fields(StepCommand c) {
  c.sample_slots = {2, 0, 1};
  SlotSamplingParams p{2, 0.7f, 20, 0.95f, 0.0f, 8};
  p.min_tokens_position = 37;
  p.min_tokens_masked_ids = {151645, 151643};
  p.repetition_penalty = 1.3f;
  for (int32_t id = 0; id < 30000; ++id) {  // a long prompt's token state
    p.token_state_ids.push_back(id);
    p.token_state_values.push_back(0x8000);
  }
  p.logit_bias_ids = {5, 7};
  p.logit_bias_values = {-100.0f, 3.5f};
  p.num_logprobs = 20;
  c.new_slot_params = {p, p};
  c.sample_logprobs = true;
  c.prompt_logprobs_targets = {11, 12, 13};
  c.prompt_logprobs_num_top = {0, 5, 20};
  return c;
}

TEST(StepCommandSerialization, WorkersGetTheSlotsAndTheirDrawParametersOnly) {
  // Workers draw shard candidates: the rows' slots and each new slot's six draw parameters
  // travel; the token state, mask, bias, logprobs and the logprobs targets cost the ring
  // nothing and decode empty.
  StepCommand c;
  c.kind = StepKind::kPrefill;
  c.input_ids = {1, 2, 3};
  c.logits_indices = {2};
  c.prompt_logprobs_indices = {0, 1};
  const StepCommand full = with_rank0_sampling_fields(c);
  StepCommand travelling = c;
  travelling.sample_slots = full.sample_slots;
  for (const SlotSamplingParams& p : full.new_slot_params)
    travelling.new_slot_params.push_back(
        SlotSamplingParams{p.slot, p.temperature, p.top_k, p.top_p, p.min_p, p.seed});
  const std::vector<uint8_t> bytes = encode_step_command(full);
  EXPECT_EQ(bytes.size(), encode_step_command(travelling).size());
  const StepCommand back = decode_step_command(bytes);
  expect_same(back, full);
  ASSERT_EQ(back.new_slot_params.size(), 2u);
  for (const SlotSamplingParams& p : back.new_slot_params) {
    EXPECT_TRUE(p.token_state_ids.empty());
    EXPECT_TRUE(p.min_tokens_masked_ids.empty());
    EXPECT_TRUE(p.logit_bias_ids.empty());
    EXPECT_EQ(p.num_logprobs, -1);
    EXPECT_EQ(p.repetition_penalty, 1.0f);
  }
  EXPECT_FALSE(back.sample_logprobs);
  EXPECT_TRUE(back.prompt_logprobs_targets.empty());
  EXPECT_TRUE(back.prompt_logprobs_num_top.empty());
}

TEST(StepCommandSerialization, WorstCaseCommandHoldsAPromptLogprobsRowPerToken) {
  // The ring's slot bound counts a prompt_logprobs row for every token of the largest step
  // (every prompt of a prefill asking for them) and every row's slot and new parameters, and
  // nothing for rank 0's own sampling fields.
  const StepLimits limits{256, 8, 256, 16};
  const StepCommand worst = worst_case_step_command(limits);
  EXPECT_EQ(worst.prompt_logprobs_indices.size(), 256u);
  EXPECT_LE(encode_step_command(with_rank0_sampling_fields(worst)).size(),
            max_step_command_bytes(limits));
  StepCommand c = worst;
  c.prompt_logprobs_indices.clear();
  EXPECT_EQ(max_step_command_bytes(limits) - encode_step_command(c).size(), size_t{256} * 4);
}

TEST(StepCommandSerialization, ExitCommandRoundTrips) {
  StepCommand exit_cmd;
  exit_cmd.kind = StepKind::kExit;
  exit_cmd.step_id = 42;
  const StepCommand back = decode_step_command(encode_step_command(exit_cmd));
  EXPECT_EQ(back.kind, StepKind::kExit);
  EXPECT_EQ(back.step_id, 42u);
  EXPECT_TRUE(back.input_ids.empty());
}

TEST(StepCommandSerialization, EncodingIsCompactForPrimitiveVectors) {
  // The binary archive writes an int32 vector as one block: about 4 bytes an element.
  StepCommand c;
  c.kind = StepKind::kPrefill;
  c.input_ids.assign(10000, 1);
  c.positions.assign(10000, 2);
  c.slot_mapping.assign(10000, 3);
  const size_t payload = 3 * 10000 * sizeof(int32_t);
  EXPECT_LT(encode_step_command(c).size(), payload + 512);
}

TEST(StepCommandSerialization, TruncatedBytesAreACheckFailure) {
  const std::vector<uint8_t> bytes = encode_step_command(random_command(7));
  ASSERT_GT(bytes.size(), 20u);
  const std::span<const uint8_t> half(bytes.data(), bytes.size() / 2);
  EXPECT_THROW(decode_step_command(half), CheckError);
}

TEST(StepCommandSerialization, UnknownKindIsACheckFailure) {
  std::vector<uint8_t> bytes = encode_step_command(StepCommand{});
  // Find the kind byte by encoding two commands that differ only in their kind.
  StepCommand prefill;
  prefill.kind = StepKind::kPrefill;
  const std::vector<uint8_t> other = encode_step_command(prefill);
  ASSERT_EQ(bytes.size(), other.size());
  size_t at = 0;
  while (at < bytes.size() && bytes[at] == other[at]) ++at;
  ASSERT_LT(at, bytes.size());
  bytes[at] = 200;
  EXPECT_THROW(decode_step_command(bytes), CheckError);
}

TEST(StepCommandSerialization, CommandsCrossTheRingIntact) {
  test::LocalCommandRing ring(3);
  std::vector<uint8_t> got;
  for (uint32_t seed = 100; seed < 120; ++seed) {
    ring.writer->write(encode_step_command(random_command(seed)));
    ASSERT_TRUE(ring.reader->read(got));
    expect_same(decode_step_command(got), random_command(seed));
  }
}

}  // namespace
}  // namespace nanovllm
