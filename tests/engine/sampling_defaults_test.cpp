// Sampling precedence: generation_config.json < command line < request; max_tokens room.
#include "engine/sampling_defaults.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <utility>
#include <vector>

namespace nanovllm {
namespace {

TEST(SamplingDefaults, NothingSetGivesBuiltInDefaultsAndTheRestOfTheContext) {
  const SamplingParams p = resolve_sampling({}, {}, 10, 100);
  const SamplingParams built_in;
  EXPECT_EQ(p.temperature, built_in.temperature);
  EXPECT_EQ(p.top_k, built_in.top_k);
  EXPECT_EQ(p.top_p, built_in.top_p);
  EXPECT_EQ(p.min_p, built_in.min_p);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(p.max_tokens, 90);
}

TEST(SamplingDefaults, EachLevelOverridesOnlyTheFieldsItSets) {
  SamplingLevels levels;
  levels.generation_config.temperature = 0.6f;
  levels.generation_config.top_k = 20;
  levels.generation_config.top_p = 0.95f;
  levels.cli.temperature = 0.8f;
  levels.cli.min_p = 0.05f;
  levels.cli.seed = 11;
  SamplingOverrides request;
  request.temperature = 0.0f;
  request.top_k = 5;

  const SamplingParams p = resolve_sampling(levels, request, 4, 32);
  EXPECT_EQ(p.temperature, 0.0f);  // request beats CLI beats generation config
  EXPECT_TRUE(p.greedy());
  EXPECT_EQ(p.top_k, 5);      // request beats generation config
  EXPECT_EQ(p.top_p, 0.95f);  // only generation config sets it
  EXPECT_EQ(p.min_p, 0.05f);  // only the CLI sets it
  EXPECT_EQ(p.seed, 11u);

  const SamplingParams no_request = resolve_sampling(levels, {}, 4, 32);
  EXPECT_EQ(no_request.temperature, 0.8f);  // CLI beats generation config
  EXPECT_EQ(no_request.top_k, 20);
}

TEST(SamplingDefaults, MaxTokensFromLowerLevelsIsCappedToTheRoomLeft) {
  SamplingLevels levels;
  levels.generation_config.max_tokens = 1000;
  EXPECT_EQ(resolve_sampling(levels, {}, 90, 100).max_tokens, 10);
  levels.cli.max_tokens = 5;
  EXPECT_EQ(resolve_sampling(levels, {}, 90, 100).max_tokens, 5);
  SamplingOverrides request;
  request.max_tokens = 50;  // kept as given: validation reports it, not a silent cap
  EXPECT_EQ(resolve_sampling(levels, request, 90, 100).max_tokens, 50);
}

TEST(SamplingDefaults, GenerationConfigOfQwen3IsRead) {
  // The values Qwen3-0.6B ships in generation_config.json.
  const auto config = nlohmann::json::parse(
      R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
          "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
          "transformers_version": "4.51.0"})");
  const SamplingOverrides o = generation_config_overrides(config, "g.json");
  EXPECT_FLOAT_EQ(*o.temperature, 0.6f);
  EXPECT_EQ(*o.top_k, 20);
  EXPECT_FLOAT_EQ(*o.top_p, 0.95f);
  EXPECT_FALSE(o.min_p.has_value());
  EXPECT_FALSE(o.max_tokens.has_value());
}

TEST(SamplingDefaults, GenerationConfigMinPIsRead) {
  const SamplingOverrides o = generation_config_overrides(
      nlohmann::json::parse(R"({"do_sample": true, "min_p": 0.05, "eos_token_id": 7})"), "g.json");
  EXPECT_FLOAT_EQ(*o.min_p, 0.05f);
  EXPECT_FALSE(o.temperature.has_value());  // do_sample true sets nothing by itself
}

TEST(SamplingDefaults, GenerationConfigRepetitionPenaltyIsADefaultThatRequestsOverride) {
  // Qwen2.5-Instruct ships repetition_penalty 1.05; vLLM takes it as a default.
  SamplingLevels levels;
  levels.generation_config = generation_config_overrides(
      nlohmann::json::parse(R"({"repetition_penalty": 1.05, "temperature": 0.7})"), "g.json");
  EXPECT_FLOAT_EQ(*levels.generation_config.repetition_penalty, 1.05f);
  EXPECT_FLOAT_EQ(resolve_sampling(levels, {}, 4, 32).repetition_penalty, 1.05f);
  SamplingOverrides request;
  request.repetition_penalty = 1.0f;
  EXPECT_EQ(resolve_sampling(levels, request, 4, 32).repetition_penalty, 1.0f);
  EXPECT_EQ(resolve_sampling({}, {}, 4, 32).repetition_penalty, 1.0f);  // unset: off
}

TEST(SamplingDefaults, RepetitionPenaltyMustBeAFinitePositiveNumber) {
  SamplingOverrides o;
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    o.repetition_penalty = bad;
    const auto p = check_sampling_overrides(o);
    ASSERT_TRUE(p.has_value()) << bad;
    EXPECT_EQ(p->field, "repetition_penalty");
    EXPECT_NE(p->message.find("must be a finite number > 0"), std::string::npos) << p->message;
  }
  o.repetition_penalty = 0.5f;
  EXPECT_FALSE(check_sampling_overrides(o).has_value());
}

TEST(SamplingDefaults, DoSampleFalseMeansGreedyAndMaxNewTokensMeansMaxTokens) {
  const SamplingOverrides o = generation_config_overrides(
      nlohmann::json::parse(R"({"do_sample": false, "temperature": 0.7, "max_new_tokens": 30})"),
      "g.json");
  EXPECT_EQ(*o.temperature, 0.0f);
  EXPECT_EQ(*o.max_tokens, 30);
}

TEST(SamplingDefaults, BadGenerationConfigValueNamesFileAndField) {
  try {
    generation_config_overrides(nlohmann::json::parse(R"({"top_p": 0})"), "model/g.json");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("model/g.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos) << e.what();
  }
}

TEST(SamplingDefaults, GenerationConfigValuesAreRangeChecked) {
  for (const auto& [text, field] : std::vector<std::pair<const char*, const char*>>{
           {R"({"top_p": 1.5})", "top_p"},
           {R"({"temperature": -0.5})", "temperature"},
           {R"({"temperature": "hot"})", "temperature"},
           {R"({"min_p": 1.5})", "min_p"},
           {R"({"top_k": -2})", "top_k"},
           {R"({"max_new_tokens": 0})", "max_new_tokens"},
           {R"({"repetition_penalty": 0})", "repetition_penalty"},
           {R"({"repetition_penalty": "high"})", "repetition_penalty"},
           {R"({"do_sample": "yes"})", "do_sample"}}) {
    try {
      generation_config_overrides(nlohmann::json::parse(text), "/m/generation_config.json");
      ADD_FAILURE() << "no error for " << text;
    } catch (const std::runtime_error& e) {
      const std::string expected = std::string("/m/generation_config.json: field '") + field + "'";
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(SamplingDefaults, ModelFolderWithoutGenerationConfigHasNoDefaults) {
  const SamplingOverrides o = load_generation_config("/nonexistent-model-folder");
  EXPECT_FALSE(o.temperature || o.top_p || o.top_k || o.min_p || o.max_tokens);
}

TEST(SamplingDefaults, GenerationConfigFileIsLoadedAndMalformedJsonNamesIt) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("nanovllm_sampling_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "generation_config.json") << R"({"temperature": 0.25})";
  EXPECT_FLOAT_EQ(*load_generation_config(dir).temperature, 0.25f);
  std::ofstream(dir / "generation_config.json") << R"({"temperature": )";
  try {
    load_generation_config(dir);
    ADD_FAILURE() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST(SamplingDefaults, CommandLineValuesAreRangeChecked) {
  SamplingOverrides cli;
  EXPECT_FALSE(check_sampling_overrides(cli).has_value());
  cli.min_p = 2.0f;
  ASSERT_TRUE(check_sampling_overrides(cli).has_value());
  EXPECT_EQ(check_sampling_overrides(cli)->field, "min_p");
  cli = {};
  cli.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(check_sampling_overrides(cli)->field, "temperature");
  cli = {};
  cli.max_tokens = 0;
  EXPECT_EQ(check_sampling_overrides(cli)->field, "max_tokens");
}

TEST(SamplingDefaults, RequestOnlyDefaultsMirrorSamplingParams) {
  SamplingParams p;
  p.stop = {"left over"};
  p.n = 9;
  p.logprobs = 3;
  p.logit_bias = {{1, 1.0f}};
  apply_request_only(RequestOnlySampling{}, p);
  const SamplingParams built_in;
  EXPECT_EQ(p.stop, built_in.stop);
  EXPECT_EQ(p.stop_token_ids, built_in.stop_token_ids);
  EXPECT_EQ(p.include_stop_str_in_output, built_in.include_stop_str_in_output);
  EXPECT_EQ(p.min_tokens, built_in.min_tokens);
  EXPECT_EQ(p.skip_special_tokens, built_in.skip_special_tokens);
  EXPECT_EQ(p.spaces_between_special_tokens, built_in.spaces_between_special_tokens);
  EXPECT_EQ(p.n, built_in.n);
  EXPECT_EQ(p.presence_penalty, built_in.presence_penalty);
  EXPECT_EQ(p.frequency_penalty, built_in.frequency_penalty);
  EXPECT_EQ(p.logit_bias, built_in.logit_bias);
  EXPECT_EQ(p.logprobs, built_in.logprobs);
  EXPECT_EQ(p.prompt_logprobs, built_in.prompt_logprobs);
}

TEST(SamplingDefaults, RequestOnlyFieldsAreCopiedWithoutTouchingTheLeveledOnes) {
  SamplingLevels levels;
  levels.cli.temperature = 0.3f;
  SamplingParams p = resolve_sampling(levels, {}, 4, 32);
  RequestOnlySampling request;
  request.stop = {"a", "bc"};
  request.stop_token_ids = {5, 6};
  request.include_stop_str_in_output = true;
  request.min_tokens = 3;
  request.skip_special_tokens = false;
  request.spaces_between_special_tokens = false;
  request.n = 4;
  request.presence_penalty = 0.5f;
  request.frequency_penalty = -0.5f;
  request.logit_bias = {{2, 1.0f}, {9, -3.0f}};
  request.logprobs = 0;
  request.prompt_logprobs = 20;
  apply_request_only(request, p);
  EXPECT_EQ(p.stop, request.stop);
  EXPECT_EQ(p.stop_token_ids, request.stop_token_ids);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_EQ(p.min_tokens, 3);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_FALSE(p.spaces_between_special_tokens);
  EXPECT_EQ(p.n, 4);
  EXPECT_EQ(p.presence_penalty, 0.5f);
  EXPECT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_EQ(p.logit_bias, request.logit_bias);
  EXPECT_EQ(p.logprobs, 0);
  EXPECT_EQ(p.prompt_logprobs, 20);
  EXPECT_EQ(p.temperature, 0.3f);
  EXPECT_EQ(p.max_tokens, 28);
}

}  // namespace
}  // namespace nanovllm
