// Rank 0's per-slot sampling state on the CPU backend: parameters reach their arrays, a
// refill replaces them, a penalized slot's token state is reset to the entries it was sent.
#include "rank/slot_sampling_state.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/sampler_math.h"

namespace nanovllm {
namespace {

constexpr int64_t kVocab = 64;

TEST(SlotSamplingState, MinTokensMasksReachTheArraysAndARefillMasksNothing) {
  SlotSamplingState state(4, kVocab, Device::kCpu);
  SlotSamplingParams a{1, 0.5f, 20, 0.9f, 0.0f, 7};
  a.min_tokens_position = 12;
  a.min_tokens_masked_ids = {5, 9};
  SlotSamplingParams b{3, 0.0f, -1, 1.0f, 0.0f, 8};
  b.min_tokens_position = 30;
  b.min_tokens_masked_ids = {2};
  const SlotSamplingParams first[] = {a, b};
  state.apply(first, nullptr);
  const kernels::SamplingSlotParams p = state.params();
  ASSERT_EQ(p.min_tokens_masked_ids.ndim, 2);
  ASSERT_EQ(p.min_tokens_masked_ids.size(0), 4);
  ASSERT_EQ(p.min_tokens_masked_ids.size(1), kMaxMinTokensMaskedIds);
  const auto* position = p.min_tokens_position.ptr<int32_t>();
  const auto row = [&](int slot) {
    const int32_t* ids = p.min_tokens_masked_ids.ptr<int32_t>() + slot * kMaxMinTokensMaskedIds;
    return std::vector<int32_t>(ids, ids + kMaxMinTokensMaskedIds);
  };
  auto padded = [](std::vector<int32_t> ids) {
    ids.resize(kMaxMinTokensMaskedIds, -1);
    return ids;
  };
  EXPECT_EQ(std::vector<int32_t>(position, position + 4), (std::vector<int32_t>{0, 12, 0, 30}));
  EXPECT_EQ(row(1), padded({5, 9}));
  EXPECT_EQ(row(3), padded({2}));
  EXPECT_EQ(row(0), padded({}));
  EXPECT_EQ(p.seeds.ptr<int64_t>()[1], 7);  // the other arrays stay where they were
  EXPECT_EQ(p.temperatures.ptr<float>()[1], 0.5f);
  // Refills: slot 1 masks nothing, slot 3 has a position but no ids (nothing either), slot 0
  // the longest mask.
  SlotSamplingParams c{0, 1.0f, -1, 1.0f, 0.0f, 9};
  c.min_tokens_position = 4;
  for (int i = 0; i < kMaxMinTokensMaskedIds; ++i) c.min_tokens_masked_ids.push_back(100 + i);
  SlotSamplingParams d{3, 1.0f, -1, 1.0f, 0.0f, 10};
  d.min_tokens_position = 40;
  const SlotSamplingParams second[] = {SlotSamplingParams{1, 1.0f, -1, 1.0f, 0.0f, 11}, d, c};
  state.apply(second, nullptr);
  EXPECT_EQ(std::vector<int32_t>(position, position + 4), (std::vector<int32_t>{4, 0, 0, 0}));
  EXPECT_EQ(row(0), c.min_tokens_masked_ids);
  // One id too many is a bug on rank 0.
  c.min_tokens_masked_ids.push_back(1);
  const SlotSamplingParams too_many[] = {c};
  EXPECT_THROW(state.apply(too_many, nullptr), CheckError);
}

TEST(SlotSamplingState, PenalizedSlotTokenStateIsResetToItsEntriesOnEveryFill) {
  SlotSamplingState state(3, kVocab, Device::kCpu);
  SlotSamplingParams a{2, 0.0f, -1, 1.0f, 0.0f, 1};
  a.repetition_penalty = 1.5f;
  a.token_state_ids = {3, 60};
  a.token_state_values = {kTokenStateInPrompt, 2};
  a.logit_bias_ids = {7};
  a.logit_bias_values = {-3.0f};
  a.num_logprobs = 4;
  const SlotSamplingParams first[] = {a};
  state.apply(first, nullptr);
  const kernels::SamplingSlotParams p = state.params();
  ASSERT_EQ(p.token_state.dtype, DType::kU16);
  ASSERT_EQ(p.token_state.size(1), kVocab);
  const auto state_row = [&](int slot) {
    const uint16_t* row = p.token_state.ptr<uint16_t>() + slot * kVocab;
    return std::vector<uint16_t>(row, row + kVocab);
  };
  std::vector<uint16_t> want(kVocab, 0);
  want[3] = kTokenStateInPrompt;
  want[60] = 2;
  EXPECT_EQ(state_row(2), want);
  EXPECT_EQ(p.repetition_penalty.ptr<float>()[2], 1.5f);
  EXPECT_EQ(p.logit_bias_count.ptr<int32_t>()[2], 1);
  EXPECT_EQ(p.logit_bias_ids.ptr<int32_t>()[2 * kMaxSlotLogitBias], 7);
  EXPECT_EQ(p.logit_bias_values.ptr<float>()[2 * kMaxSlotLogitBias], -3.0f);
  EXPECT_EQ(p.num_logprobs.ptr<int32_t>()[2], 4);
  EXPECT_EQ(p.num_logprobs.ptr<int32_t>()[0], -1);  // never filled: no logprobs
  EXPECT_EQ(p.repetition_penalty.ptr<float>()[0], 1.0f);
  // The sampler counted a token since; a refill by another penalized sequence starts over.
  p.token_state.ptr<uint16_t>()[2 * kVocab + 9] = 5;
  SlotSamplingParams b{2, 0.0f, -1, 1.0f, 0.0f, 2};
  b.presence_penalty = 0.5f;
  b.token_state_ids = {9};
  b.token_state_values = {1};
  const SlotSamplingParams second[] = {b};
  state.apply(second, nullptr);
  std::vector<uint16_t> want_b(kVocab, 0);
  want_b[9] = 1;
  EXPECT_EQ(state_row(2), want_b);
  EXPECT_EQ(p.logit_bias_count.ptr<int32_t>()[2], 0);
  EXPECT_EQ(p.num_logprobs.ptr<int32_t>()[2], -1);
  // An id outside the vocabulary is a bug on rank 0.
  b.token_state_ids = {kVocab};
  const SlotSamplingParams bad[] = {b};
  EXPECT_THROW(state.apply(bad, nullptr), CheckError);
}

// Every rank's decode graph replay asks for the last tokens; a worker, which samples nothing,
// answers with an empty view (it once failed the buffer's CHECK, and --tp 2 with it).
TEST(SlotSamplingState, LastTokensAreRankZerosAWorkerHasAnEmptyView) {
  const SlotSamplingState rank0(5, kVocab, Device::kCpu, 0, 2);
  EXPECT_NE(rank0.last_tokens().data, nullptr);
  EXPECT_EQ(rank0.last_tokens().numel(), 5);
  const SlotSamplingState worker(5, kVocab, Device::kCpu, 1, 2);
  EXPECT_EQ(worker.last_tokens().data, nullptr);
}

}  // namespace
}  // namespace nanovllm
