// The logprobs JSON shapes (vLLM's native dicts, OpenAI chat and completions), token texts
// from raw bytes (partial characters as U+FFFD), and the clamp of -inf.
#include "engine/logprobs_json.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <vector>

namespace nanovllm {
namespace {

// Token 1 = "a", 2 = "é" (2 bytes), 3 = the first byte of "é" only, 4 = "<|im_end|>".
std::string fake_bytes(int32_t id) {
  static const std::map<int32_t, std::string> kBytes = {
      {1, "a"}, {2, "\xC3\xA9"}, {3, "\xC3"}, {4, "<|im_end|>"}};
  const auto it = kBytes.find(id);
  return it == kBytes.end() ? std::string() : it->second;
}

// Sampled token 2 (rank 2), top 2 = [1, 2]: the sampled token is also in the top.
PositionLogprobs sampled_in_top() {
  return PositionLogprobs{2, -1.5f, 2, {{1, -0.5f}, {2, -1.5f}}};
}

// Sampled token 3 (rank 5), top 2 = [1, 4]: the sampled token is not in the top.
PositionLogprobs sampled_outside_top() {
  return PositionLogprobs{3, -4.0f, 5, {{1, -0.25f}, {4, -2.0f}}};
}

TEST(LogprobsJson, TokenTextReplacesPartialCharactersAndIsNullWithoutTokenBytes) {
  EXPECT_EQ(token_text(2, fake_bytes), "\xC3\xA9");
  EXPECT_EQ(token_text(3, fake_bytes), "\xEF\xBF\xBD");  // U+FFFD
  EXPECT_EQ(token_text(4, fake_bytes), "<|im_end|>");
  EXPECT_FALSE(token_text(2, TokenBytes()).has_value());
}

TEST(LogprobsJson, NativeDictHasTheChosenTokenAndTheTopNNotAlreadyListed) {
  const std::vector<PositionLogprobs> positions = {sampled_in_top(), sampled_outside_top()};
  const nlohmann::json j = native_logprobs_json(positions, fake_bytes);
  ASSERT_EQ(j.size(), 2u);
  // In the top: N keys; outside it: N + 1.
  ASSERT_EQ(j[0].size(), 2u);
  ASSERT_EQ(j[1].size(), 3u);
  EXPECT_EQ(j[0]["2"], (nlohmann::json{{"logprob", -1.5}, {"rank", 2}, {"decoded_token", "é"}}));
  EXPECT_EQ(j[0]["1"]["rank"], 1);
  EXPECT_EQ(j[1]["3"]["rank"], 5);
  EXPECT_EQ(j[1]["3"]["decoded_token"], "\xEF\xBF\xBD");
  EXPECT_EQ(j[1]["4"]["rank"], 2);
  EXPECT_EQ(j[1]["4"]["logprob"], -2.0);
  EXPECT_NO_THROW((void)j.dump());
}

TEST(LogprobsJson, PromptLogprobsStartWithNullForTheFirstPromptToken) {
  const std::vector<PositionLogprobs> positions = {sampled_outside_top()};
  const nlohmann::json j = prompt_logprobs_json(positions, fake_bytes);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_TRUE(j[0].is_null());
  EXPECT_EQ(j[1]["3"]["logprob"], -4.0);
  EXPECT_EQ(prompt_logprobs_json({}, fake_bytes), nlohmann::json::array({nullptr}));
}

TEST(LogprobsJson, ChatContentHasTokenLogprobBytesAndTheTopN) {
  const std::vector<PositionLogprobs> positions = {sampled_outside_top()};
  const nlohmann::json j = chat_logprobs_json(positions, fake_bytes);
  EXPECT_TRUE(j["refusal"].is_null());
  ASSERT_EQ(j["content"].size(), 1u);
  const nlohmann::json& entry = j["content"][0];
  EXPECT_EQ(entry["token"], "\xEF\xBF\xBD");
  EXPECT_EQ(entry["logprob"], -4.0);
  EXPECT_EQ(entry["bytes"], nlohmann::json::array({0xC3}));  // the raw byte, not U+FFFD's
  ASSERT_EQ(entry["top_logprobs"].size(), 2u);               // the top N only
  EXPECT_EQ(entry["top_logprobs"][0],
            (nlohmann::json{{"token", "a"}, {"logprob", -0.25}, {"bytes", {97}}}));
  EXPECT_EQ(entry["top_logprobs"][1]["token"], "<|im_end|>");
}

TEST(LogprobsJson, CompletionListsAreParallelAndTextOffsetsCountCodePoints) {
  // Tokens "é", "a", "é": offsets 0, 1 (one code point, two bytes), 2.
  const std::vector<PositionLogprobs> positions = {
      PositionLogprobs{2, -0.1f, 1, {{2, -0.1f}}},
      PositionLogprobs{1, -0.2f, 1, {{1, -0.2f}}},
      sampled_in_top(),
  };
  const nlohmann::json j = completion_logprobs_json(positions, fake_bytes);
  EXPECT_EQ(j["tokens"], (nlohmann::json{"é", "a", "é"}));
  EXPECT_EQ(j["token_logprobs"][2], -1.5);
  EXPECT_EQ(j["text_offset"], (nlohmann::json{0, 1, 2}));
  ASSERT_EQ(j["top_logprobs"].size(), 3u);
  // The sampled token and the top N, keyed by text.
  EXPECT_EQ(j["top_logprobs"][2], (nlohmann::json{{"é", -1.5}, {"a", -0.5}}));
}

TEST(LogprobsJson, WithoutTokenBytesTextsAreNullAndCompletionKeysNameTheId) {
  const std::vector<PositionLogprobs> positions = {sampled_outside_top()};
  EXPECT_TRUE(native_logprobs_json(positions, {})[0]["3"]["decoded_token"].is_null());
  const nlohmann::json chat = chat_logprobs_json(positions, {});
  EXPECT_TRUE(chat["content"][0]["token"].is_null());
  EXPECT_TRUE(chat["content"][0]["bytes"].is_null());
  const nlohmann::json completion = completion_logprobs_json(positions, {});
  EXPECT_TRUE(completion["tokens"][0].is_null());
  EXPECT_TRUE(completion["text_offset"][0].is_null());
  EXPECT_EQ(completion["top_logprobs"][0],
            (nlohmann::json{{"token_id:3", -4.0}, {"token_id:1", -0.25}, {"token_id:4", -2.0}}));
}

TEST(LogprobsJson, MinusInfinityIsWrittenAsMinus9999) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const std::vector<PositionLogprobs> positions = {PositionLogprobs{1, minus_inf, 7, {}}};
  EXPECT_EQ(native_logprobs_json(positions, fake_bytes)[0]["1"]["logprob"], -9999.0);
  EXPECT_EQ(chat_logprobs_json(positions, fake_bytes)["content"][0]["logprob"], -9999.0);
  EXPECT_EQ(completion_logprobs_json(positions, fake_bytes)["token_logprobs"][0], -9999.0);
}

}  // namespace
}  // namespace nanovllm
