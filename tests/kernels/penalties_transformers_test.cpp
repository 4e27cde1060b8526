// The CPU sampler's repetition penalty against transformers' RepetitionPenaltyLogitsProcessor
// on the same logits (tests/fixtures/penalties/repetition_penalty.json, written by
// scripts/make_penalty_fixture.py): rule P's processed row equals the processor's output bit
// for bit (one float multiply or divide per token on both sides).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/sampler.h"
#include "kernels/sampler_math.h"

namespace nanovllm {
namespace {

nlohmann::json fixture() {
  const std::string path =
      std::string(NANOVLLM_SOURCE_DIR) + "/tests/fixtures/penalties/repetition_penalty.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

TEST(PenaltiesTransformers, RepetitionPenaltyEqualsTransformersProcessorOnTheSameLogits) {
  const nlohmann::json f = fixture();
  const int64_t vocab = f.at("vocab").get<int64_t>();
  ASSERT_GE(f.at("cases").size(), 3u);
  for (const nlohmann::json& c : f.at("cases")) {
    const float penalty = c.at("penalty").get<float>();
    std::vector<float> logits = c.at("logits").get<std::vector<float>>();  // [1, V]
    const std::vector<float> expected = c.at("expected").get<std::vector<float>>();
    ASSERT_EQ(static_cast<int64_t>(logits.size()), vocab);
    // One slot: greedy, repetition penalty only; its token state from the context.
    std::vector<uint16_t> state(static_cast<size_t>(vocab), 0);  // [1, V]
    for (const int32_t id : c.at("prompt").get<std::vector<int32_t>>())
      state[id] = static_cast<uint16_t>(kernels::kTokenInPrompt);
    for (const int32_t id : c.at("generated").get<std::vector<int32_t>>())
      state[id] = static_cast<uint16_t>(kernels::token_state_after_sample(state[id]));
    float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f, presence = 0.0f, frequency = 0.0f;
    float repetition = penalty;
    int32_t top_k = -1, slot = 0, position = 100, out = -1;
    int64_t seed = 0;
    std::vector<float> processed(static_cast<size_t>(vocab), -1.0f);  // [1, V]
    kernels::SamplingBatch b;
    b.logits = TensorView(logits.data(), DType::kF32, {1, vocab});
    b.slots = TensorView(&slot, DType::kI32, {1});
    b.positions = TensorView(&position, DType::kI32, {1});
    b.params.temperatures = TensorView(&temperature, DType::kF32, {1});
    b.params.top_k = TensorView(&top_k, DType::kI32, {1});
    b.params.top_p = TensorView(&top_p, DType::kF32, {1});
    b.params.min_p = TensorView(&min_p, DType::kF32, {1});
    b.params.seeds = TensorView(&seed, DType::kI64, {1});
    b.params.repetition_penalty = TensorView(&repetition, DType::kF32, {1});
    b.params.presence_penalty = TensorView(&presence, DType::kF32, {1});
    b.params.frequency_penalty = TensorView(&frequency, DType::kF32, {1});
    b.params.token_state = TensorView(state.data(), DType::kU16, {1, vocab});
    b.processed = TensorView(processed.data(), DType::kF32, {1, vocab});
    b.out_tokens = TensorView(&out, DType::kI32, {1});
    kernels::cpu::sample(b);
    int mismatches = 0;
    for (int64_t v = 0; v < vocab; ++v)
      if (processed[v] != expected[v] && mismatches++ < 5)
        ADD_FAILURE() << "penalty " << penalty << " token " << v << ": ours " << processed[v]
                      << ", transformers " << expected[v] << " (logit " << logits[v] << ")";
    EXPECT_EQ(mismatches, 0) << "penalty " << penalty;
    // Greedy picks the processor's argmax (lowest id on ties).
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v)
      if (expected[v] > expected[best]) best = v;
    EXPECT_EQ(out, best) << "penalty " << penalty;
  }
}

}  // namespace
}  // namespace nanovllm
