#include "layers/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "layers/model_presets.h"
#include "layers/model_writer.h"
#include "layers/safetensors_writer.h"
#include "tests/layers/model_folder_test_util.h"

namespace nanovllm {
namespace {

using nlohmann::json;
using testing::TempDir;

std::vector<float> iota(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

float first_f32(const CheckpointTensor& t) {
  float f;
  std::memcpy(&f, t.data, sizeof f);
  return f;
}

TEST(Checkpoint, OpensSingleFile) {
  TempDir dir;
  const auto a = iota(6, 1.0f);
  write_safetensors(dir.path() / "model.safetensors",
                    {{{"a", DType::kF32, {2, 3}}, std::as_bytes(std::span(a))}});
  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_EQ(ck.names(), std::vector<std::string>{"a"});
  EXPECT_TRUE(ck.contains("a"));
  EXPECT_FALSE(ck.contains("b"));
  EXPECT_EQ(ck.tensor("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(ck.tensor("a").nbytes, 24u);
  EXPECT_EQ(first_f32(ck.tensor("a")), 1.0f);
}

TEST(Checkpoint, MissingTensorNamesTensorAndFolder) {
  TempDir dir;
  const auto a = iota(1, 0.0f);
  write_safetensors(dir.path() / "model.safetensors",
                    {{{"a", DType::kF32, {1}}, std::as_bytes(std::span(a))}});
  const Checkpoint ck = Checkpoint::open(dir.path());
  try {
    ck.tensor("lm_head.weight");
    FAIL();
  } catch (const ModelFolderError& e) {
    EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos);
  }
}

TEST(Checkpoint, OpensShardsThroughIndexAndSurvivesMove) {
  TempDir dir;
  const auto a = iota(4, 10.0f), b = iota(2, 20.0f);
  write_safetensors(dir.path() / "s1.safetensors",
                    {{{"a", DType::kF32, {4}}, std::as_bytes(std::span(a))}});
  write_safetensors(dir.path() / "s2.safetensors",
                    {{{"b", DType::kF32, {2}}, std::as_bytes(std::span(b))}});
  testing::write_json(dir.path() / "model.safetensors.index.json",
                      {{"metadata", {{"total_size", 24}}},
                       {"weight_map", {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}}});
  Checkpoint opened = Checkpoint::open(dir.path());
  const Checkpoint ck = std::move(opened);  // tensors keep pointing into live mappings
  EXPECT_EQ(ck.num_files(), 2u);
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(first_f32(ck.tensor("a")), 10.0f);
  EXPECT_EQ(first_f32(ck.tensor("b")), 20.0f);
}

TEST(Checkpoint, IndexErrorsNameTheFileAndTensor) {
  TempDir dir;
  const auto a = iota(4, 0.0f);
  write_safetensors(dir.path() / "s1.safetensors",
                    {{{"a", DType::kF32, {4}}, std::as_bytes(std::span(a))}});
  auto expect_error = [&](const json& index, const std::string& fragment) {
    testing::write_json(dir.path() / "model.safetensors.index.json", index);
    try {
      Checkpoint::open(dir.path());
      FAIL() << index.dump();
    } catch (const ModelFolderError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_error({{"weight_map", {{"x", "s1.safetensors"}}}}, "tensor 'x' is listed");
  expect_error({{"weight_map", {{"a", "missing.safetensors"}}}}, "missing.safetensors");
  expect_error({{"weight_map", {{"a", "../s1.safetensors"}}}}, "bad shard file name");
  expect_error({{"weight_map", {{"a", 3}}}}, "tensor 'a'");
  expect_error({{"metadata", {}}}, "weight_map");
  expect_error({{"weight_map", json::object()}}, "empty");
}

TEST(Checkpoint, EmptyFolderIsAnError) {
  TempDir dir;
  EXPECT_THROW(Checkpoint::open(dir.path()), ModelFolderError);
}

TEST(Checkpoint, ValidateAcceptsWrittenTinyModelAndNamesWrongShapes) {
  TempDir dir;
  ModelConfig config = model_preset("tiny");
  config.num_hidden_layers = 1;  // keep the test small; the embedding dominates anyway
  ModelWriterOptions options;
  options.seed = 3;
  write_model_folder(config, dir.path(), options);
  {
    const Checkpoint ck = Checkpoint::open(dir.path());
    EXPECT_NO_THROW(validate_checkpoint(load_model_config(dir.path()), ck));
  }
  ModelConfig wrong = config;
  wrong.intermediate_size = 512;
  const Checkpoint ck = Checkpoint::open(dir.path());
  try {
    validate_checkpoint(wrong, ck);
    FAIL();
  } catch (const ModelFolderError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("model.layers.0.mlp."), std::string::npos) << msg;
    EXPECT_NE(msg.find("[512, 256]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[768, 256]"), std::string::npos) << msg;
  }
  ModelConfig untied = config;
  untied.tie_word_embeddings = false;  // now lm_head.weight is required
  EXPECT_THROW(validate_checkpoint(untied, ck), ModelFolderError);
}

}  // namespace
}  // namespace nanovllm
