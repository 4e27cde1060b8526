#include "layers/model_config.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/layers/model_folder_test_util.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using testing::qwen3_config_json;
using testing::TempDir;
using testing::write_json;

// Parses `config` and expects a ModelFolderError whose message contains every fragment.
void expect_error(const json& config, std::initializer_list<std::string> fragments) {
  try {
    parse_model_config(config, "/m/config.json", nullptr, "/m/generation_config.json");
    FAIL() << "no error for " << config.dump();
  } catch (const ModelFolderError& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << msg << " lacks " << f;
  }
}

TEST(ModelConfig, ReadsPublishedQwen3Config) {
  const ModelConfig c = parse_model_config(qwen3_config_json(), "config.json", nullptr, "");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // 16 x 128 != 1024 is legal for Qwen3
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.dtype, DType::kBf16);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
  ASSERT_TRUE(c.bos_token_id.has_value());
  EXPECT_EQ(*c.bos_token_id, 151643);
}

TEST(ModelConfig, AcceptsTransformers5Spellings) {
  json j = qwen3_config_json();
  j.erase("torch_dtype");
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j["dtype"] = "float16";
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5000000}};
  const ModelConfig c = parse_model_config(j, "config.json", nullptr, "");
  EXPECT_EQ(c.dtype, DType::kF16);
  EXPECT_FLOAT_EQ(c.rope_theta, 5e6f);
}

TEST(ModelConfig, HeadDimDefaultsToHiddenOverHeads) {
  json j = qwen3_config_json();
  j.erase("head_dim");
  EXPECT_EQ(parse_model_config(j, "config.json", nullptr, "").head_dim, 1024 / 16);
}

TEST(ModelConfig, Qwen2HasBiasAndNoQkNorm) {
  json j = qwen3_config_json();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  j.erase("head_dim");
  j["hidden_size"] = 896;
  j["num_attention_heads"] = 14;
  j["num_key_value_heads"] = 2;
  const ModelConfig c = parse_model_config(j, "config.json", nullptr, "");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.head_dim, 64);
}

TEST(ModelConfig, Qwen2HeadDimMustMatchHidden) {
  json j = qwen3_config_json();
  j["architectures"] = {"Qwen2ForCausalLM"};  // head_dim 128 x 16 heads != 1024
  expect_error(j, {"/m/config.json", "'head_dim'"});
}

TEST(ModelConfig, GenerationConfigOverridesEos) {
  const json gen = json::parse(
      R"({"eos_token_id": [151645, 151643], "temperature": 0.6, "top_k": 20, "top_p": 0.95,
          "do_sample": true, "min_p": 0.05})");
  const ModelConfig c = parse_model_config(qwen3_config_json(), "config.json", &gen, "gen.json");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  const json no_eos = json::parse(R"({"temperature": 0.6})");
  const ModelConfig d = parse_model_config(qwen3_config_json(), "config.json", &no_eos, "gen.json");
  EXPECT_EQ(d.eos_token_ids, std::vector<int32_t>{151645});  // config.json's
}

// Sampling defaults are the engine's to read and check (tests/engine/sampling_defaults_test).
TEST(ModelConfig, GenerationConfigSamplingFieldsAreNotReadHere) {
  const json gen = json::parse(R"({"eos_token_id": 7, "top_p": 1.5, "do_sample": "yes"})");
  EXPECT_EQ(parse_model_config(qwen3_config_json(), "config.json", &gen, "gen.json").eos_token_ids,
            std::vector<int32_t>{7});
}

TEST(ModelConfig, BadGenerationEosNamesGenerationFile) {
  for (const char* text : {R"({"eos_token_id": 200000})", R"({"eos_token_id": "2"})", "[]"}) {
    const json gen = json::parse(text);
    try {
      parse_model_config(qwen3_config_json(), "config.json", &gen, "/m/generation_config.json");
      ADD_FAILURE() << "no error for " << text;
    } catch (const ModelFolderError& e) {
      EXPECT_NE(std::string(e.what()).find("/m/generation_config.json"), std::string::npos)
          << e.what();
    }
  }
}

TEST(ModelConfig, MissingFieldNamesFileAndField) {
  for (const char* field :
       {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "vocab_size", "rms_norm_eps", "max_position_embeddings", "architectures"}) {
    json j = qwen3_config_json();
    j.erase(field);
    expect_error(j, {"/m/config.json", std::string("'") + field + "'", "missing"});
  }
  json j = qwen3_config_json();
  j.erase("rope_theta");
  expect_error(j, {"/m/config.json", "'rope_theta'", "missing"});
}

TEST(ModelConfig, WrongTypesAndValuesNameTheField) {
  json j = qwen3_config_json();
  j["hidden_size"] = "1024";
  expect_error(j, {"'hidden_size'", "integer"});
  j = qwen3_config_json();
  j["num_hidden_layers"] = -3;
  expect_error(j, {"'num_hidden_layers'", "positive"});
  j = qwen3_config_json();
  j["num_key_value_heads"] = 3;  // does not divide 16
  expect_error(j, {"'num_key_value_heads'", "divide"});
  j = qwen3_config_json();
  j.erase("head_dim");
  j["num_attention_heads"] = 12;  // 1024 % 12 != 0
  j["num_key_value_heads"] = 4;
  expect_error(j, {"'num_attention_heads'", "hidden_size"});
  j = qwen3_config_json();
  j["tie_word_embeddings"] = 1;
  expect_error(j, {"'tie_word_embeddings'"});
  j = qwen3_config_json();
  j["eos_token_id"] = 200000;  // >= vocab
  expect_error(j, {"'eos_token_id'", "vocab_size"});
}

TEST(ModelConfig, UnknownArchitectureIsNotSupported) {
  json j = qwen3_config_json();
  j["architectures"] = {"LlamaForCausalLM"};
  expect_error(j, {"'architectures'", "not supported", "LlamaForCausalLM"});
}

TEST(ModelConfig, FeaturesWeDoNotImplementAreRefused) {
  json j = qwen3_config_json();
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  expect_error(j, {"'rope_scaling.rope_type'", "not supported", "\"dynamic\""});
  j = qwen3_config_json();
  j["rope_parameters"] = {{"rope_type", "linear"}, {"rope_theta", 1e6}, {"factor", 2.0}};
  expect_error(j, {"'rope_parameters.rope_type'", "not supported", "\"linear\""});
  j = qwen3_config_json();
  j["num_experts"] = 128;
  expect_error(j, {"'num_experts'", "not supported"});
  j = qwen3_config_json();
  j["quantization_config"] = {{"quant_method", "fp8"}};
  expect_error(j, {"'quantization_config'", "not supported"});
  j = qwen3_config_json();
  j["use_sliding_window"] = true;
  expect_error(j, {"'use_sliding_window'", "not supported"});
  j = qwen3_config_json();
  j["torch_dtype"] = "float8_e4m3fn";
  expect_error(j, {"'torch_dtype'", "not supported"});
  j = qwen3_config_json();
  j["attention_bias"] = true;  // Qwen3 would then need an o_proj bias too
  expect_error(j, {"'attention_bias'", "not supported"});
}

TEST(ModelConfig, DefaultRopeParametersAreAccepted) {
  json j = qwen3_config_json();
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_NO_THROW(parse_model_config(j, "config.json", nullptr, ""));
}

TEST(ModelConfig, LoadsFolderAndReportsBadJsonWithPath) {
  TempDir dir;
  EXPECT_THROW(load_model_config(dir.path()), ModelFolderError);  // no config.json
  write_json(dir.path() / "config.json", qwen3_config_json());
  write_json(dir.path() / "generation_config.json", json::parse(R"({"eos_token_id": 7})"));
  EXPECT_EQ(load_model_config(dir.path()).eos_token_ids, std::vector<int32_t>{7});
  testing::write_file(dir.path() / "generation_config.json", "{\"eos_token_id\": [1,\n");
  try {
    load_model_config(dir.path());
    FAIL();
  } catch (const ModelFolderError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("generation_config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("line"), std::string::npos) << msg;
  }
}

TEST(ModelConfig, YarnRopeScalingIsReadWithTheFactorAsGiven) {
  // Qwen3's model card: YaRN factor 4 over 32768 original positions; max_position_embeddings
  // stays 40960 (transformers 4 would have recomputed the factor from the two: 1.25).
  json j = qwen3_config_json();
  j["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  const ModelConfig c = parse_model_config(j, "config.json", nullptr, "");
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 32768);
  EXPECT_EQ(c.rope_scaling->beta_fast, 32.0);
  EXPECT_EQ(c.rope_scaling->beta_slow, 1.0);
  EXPECT_FALSE(c.rope_scaling->attention_factor.has_value());
  EXPECT_EQ(c.max_context_len(), 131072);
  // transformers 5's spelling, with the optional fields and theta in the same object.
  j = qwen3_config_json();
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_type", "yarn"},    {"rope_theta", 1e6}, {"factor", 2.0},
                          {"beta_fast", 16},        {"beta_slow", 2},    {"truncate", false},
                          {"attention_factor", 1.5}};
  const ModelConfig t5 = parse_model_config(j, "config.json", nullptr, "");
  ASSERT_TRUE(t5.rope_scaling.has_value());
  EXPECT_FLOAT_EQ(t5.rope_theta, 1e6f);
  EXPECT_EQ(t5.rope_scaling->original_max_position_embeddings, 40960);  // transformers' default
  EXPECT_EQ(t5.rope_scaling->beta_fast, 16.0);
  EXPECT_EQ(t5.rope_scaling->beta_slow, 2.0);
  EXPECT_FALSE(t5.rope_scaling->truncate);
  EXPECT_EQ(t5.rope_scaling->attention_factor, 1.5);
  EXPECT_EQ(t5.max_context_len(), 81920);
  // Plain RoPE either way: no scaling, the limit is max_position_embeddings.
  j = qwen3_config_json();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  const ModelConfig plain = parse_model_config(j, "config.json", nullptr, "");
  EXPECT_FALSE(plain.rope_scaling.has_value());
  EXPECT_EQ(plain.max_context_len(), 40960);
}

TEST(ModelConfig, BadYarnFieldsNameTheFieldAndWhy) {
  const auto with = [](json scaling) {
    json j = qwen3_config_json();
    j["rope_scaling"] = std::move(scaling);
    return j;
  };
  expect_error(with({{"rope_type", "yarn"}}), {"'rope_scaling.factor'", "missing"});
  expect_error(with({{"rope_type", "yarn"}, {"factor", 0.5}}), {"'rope_scaling.factor'", ">= 1"});
  expect_error(with({{"rope_type", "yarn"}, {"factor", "4"}}),
               {"'rope_scaling.factor'", "expected a number"});
  expect_error(
      with({{"rope_type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", -1}}),
      {"'rope_scaling.original_max_position_embeddings'", "positive integer"});
  expect_error(with({{"rope_type", "yarn"}, {"factor", 4}, {"mscale", 1.0}}),
               {"'rope_scaling.mscale'", "not supported"});
  expect_error(with({{"factor", 4}}), {"'rope_scaling.rope_type'", "missing"});
  expect_error(with(json::array()), {"'rope_scaling'", "expected an object"});
}

TEST(ModelConfig, HfOverridesReplaceConfigFieldsBeforeParsing) {
  TempDir dir;
  write_json(dir.path() / "config.json", qwen3_config_json());
  const json overrides = {
      {"rope_scaling",
       {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}}},
      {"max_position_embeddings", 32768}};
  const ModelConfig c = load_model_config(dir.path(), &overrides);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.max_context_len(), 131072);
  // A bad override is named as such.
  const json bad = {{"rope_scaling", {{"rope_type", "longrope"}}}};
  try {
    load_model_config(dir.path(), &bad);
    FAIL() << "no error";
  } catch (const ModelFolderError& e) {
    EXPECT_NE(std::string(e.what()).find("--hf-overrides"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("longrope"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(load_model_config(dir.path()).rope_scaling.has_value());  // the file unchanged
}

}  // namespace
}  // namespace nanovllm
