#include "layers/model_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "kernels/bf16.h"
#include "layers/checkpoint.h"
#include "layers/model_presets.h"
#include "tests/layers/model_folder_test_util.h"

namespace nanovllm {
namespace {

using testing::read_file;
using testing::TempDir;

// tiny with a small vocabulary and one layer: fast to write repeatedly.
ModelConfig small_config(bool tied = true) {
  ModelConfig c = model_preset("tiny");
  c.vocab_size = 1000;
  c.num_hidden_layers = 1;
  c.tie_word_embeddings = tied;
  c.eos_token_ids = {999, 998};
  c.bos_token_id = 998;
  return c;
}

std::vector<float> values(const CheckpointTensor& t) {
  CHECK(t.dtype == DType::kBf16);
  std::vector<float> out(t.nbytes / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, t.data + 2 * i, 2);
    out[i] = bf16_to_float(h);
  }
  return out;
}

void mean_std(const std::vector<float>& v, double* mean, double* std) {
  double s = 0, s2 = 0;
  for (float x : v) s += x;
  *mean = s / static_cast<double>(v.size());
  for (float x : v) s2 += (x - *mean) * (x - *mean);
  *std = std::sqrt(s2 / static_cast<double>(v.size()));
}

TEST(ModelWriter, SameSeedSameBytesAnyThreadCount) {
  TempDir a, b, c;
  ModelWriterOptions o;
  o.seed = 42;
  o.threads = 1;
  write_model_folder(small_config(), a.path(), o);
  o.threads = 2;
  write_model_folder(small_config(), b.path(), o);
  o.seed = 43;
  write_model_folder(small_config(), c.path(), o);
  for (const char* f : {"model.safetensors", "config.json", "generation_config.json"})
    EXPECT_EQ(read_file(a.path() / f), read_file(b.path() / f)) << f;
  EXPECT_NE(read_file(a.path() / "model.safetensors"), read_file(c.path() / "model.safetensors"));
}

TEST(ModelWriter, WeightStatisticsFollowTheDocumentedScales) {
  TempDir dir;
  ModelWriterOptions o;
  o.seed = 7;
  write_model_folder(small_config(false), dir.path(), o);
  const Checkpoint ck = Checkpoint::open(dir.path());
  double mean, std;
  mean_std(values(ck.tensor("model.embed_tokens.weight")), &mean, &std);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std, 1.0, 0.01);
  mean_std(values(ck.tensor("model.layers.0.mlp.gate_proj.weight")), &mean, &std);
  EXPECT_NEAR(std, 1.0 / std::sqrt(256.0), 0.002);
  mean_std(values(ck.tensor("model.layers.0.mlp.down_proj.weight")), &mean, &std);
  EXPECT_NEAR(std, 1.0 / std::sqrt(768.0), 0.002);
  mean_std(values(ck.tensor("model.layers.0.input_layernorm.weight")), &mean, &std);
  EXPECT_NEAR(mean, 1.0, 0.03);
  EXPECT_GT(std, 0.05);  // jittered, not all ones
  mean_std(values(ck.tensor("model.layers.0.self_attn.q_norm.weight")), &mean, &std);
  EXPECT_NEAR(mean, 2.0, 0.1);
  // Untied lm_head = embedding + N(0, 0.5^2): distinct tensor, strongly correlated.
  const auto e = values(ck.tensor("model.embed_tokens.weight"));
  const auto l = values(ck.tensor("lm_head.weight"));
  std::vector<float> diff(e.size());
  for (size_t i = 0; i < e.size(); ++i) diff[i] = l[i] - e[i];
  mean_std(diff, &mean, &std);
  EXPECT_NEAR(std, 0.5, 0.02);
  // Approximately normal: about 68% of the embedding within one std.
  size_t within = 0;
  for (float x : e) within += std::fabs(x) < 1.0f;
  EXPECT_NEAR(static_cast<double>(within) / static_cast<double>(e.size()), 0.6827, 0.02);
}

TEST(ModelWriter, ShardedFolderHasTheSameTensorsAsSingleFile) {
  TempDir single, sharded;
  ModelWriterOptions o;
  o.seed = 1;
  write_model_folder(small_config(false), single.path(), o);
  o.max_shard_bytes = 600'000;  // embedding and lm_head are 512000 bytes each
  write_model_folder(small_config(false), sharded.path(), o);
  const size_t shards =
      plan_shards(model_tensor_specs(small_config(false)), 2, o.max_shard_bytes).size();
  ASSERT_GE(shards, 3u);
  EXPECT_FALSE(std::filesystem::exists(sharded.path() / "model.safetensors"));
  char last[64];
  std::snprintf(last, sizeof last, "model-%05zu-of-%05zu.safetensors", shards, shards);
  EXPECT_TRUE(std::filesystem::exists(sharded.path() / last)) << last;
  const auto index = testing::read_file(sharded.path() / "model.safetensors.index.json");
  EXPECT_NE(index.find("\"total_size\""), std::string::npos);
  const Checkpoint a = Checkpoint::open(single.path());
  const Checkpoint b = Checkpoint::open(sharded.path());
  EXPECT_EQ(b.num_files(), shards);
  ASSERT_EQ(a.names(), b.names());
  for (const std::string& name : a.names())
    EXPECT_EQ(values(a.tensor(name)), values(b.tensor(name))) << name;
  EXPECT_NO_THROW(validate_checkpoint(load_model_config(sharded.path()), b));
}

TEST(ModelWriter, ConfigRoundTripsThroughTheLoader) {
  TempDir dir;
  ModelWriterOptions o;
  o.seed = 5;
  o.preset = "tiny";
  const ModelConfig c = model_preset("tiny");
  write_model_folder(c, dir.path(), o);
  const ModelConfig back = load_model_config(dir.path());
  EXPECT_EQ(back.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(back.vocab_size, 151936);
  EXPECT_EQ(back.hidden_size, 256);
  EXPECT_EQ(back.intermediate_size, 768);
  EXPECT_EQ(back.num_hidden_layers, 4);
  EXPECT_EQ(back.num_attention_heads, 4);
  EXPECT_EQ(back.num_key_value_heads, 2);
  EXPECT_EQ(back.head_dim, 64);
  EXPECT_TRUE(back.tie_word_embeddings);
  EXPECT_FLOAT_EQ(back.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(back.rms_norm_eps, 1e-6f);
  EXPECT_EQ(back.eos_token_ids, (std::vector<int32_t>{151645, 151643}));  // generation_config
  // Qwen3's sampling defaults, for the engine to read (ModelConfig does not carry them).
  const nlohmann::json gen = read_json_file(dir.path() / "generation_config.json");
  EXPECT_EQ(gen.at("do_sample"), true);
  EXPECT_FLOAT_EQ(gen.at("temperature").get<float>(), 0.6f);
  EXPECT_EQ(gen.at("top_k"), 20);
  EXPECT_FLOAT_EQ(gen.at("top_p").get<float>(), 0.95f);
  EXPECT_FALSE(gen.contains("min_p"));
  const auto config_text = read_file(dir.path() / "config.json");
  EXPECT_NE(config_text.find("\"rms_norm_eps\": 1e-06"), std::string::npos);
  EXPECT_NE(config_text.find("\"model_type\": \"qwen3\""), std::string::npos);
  EXPECT_NE(config_text.find("\"preset\": \"tiny\""), std::string::npos);
  EXPECT_NO_THROW(validate_checkpoint(back, Checkpoint::open(dir.path())));
}

TEST(ModelWriter, CopiesTokenizerFilesAndRequiresTokenizerJson) {
  TempDir tok, out, bad;
  testing::write_file(tok.path() / "tokenizer.json", "{\"tok\":1}");
  testing::write_file(tok.path() / "tokenizer_config.json", "{}");
  testing::write_file(tok.path() / "merges.txt", "a b\n");
  ModelWriterOptions o;
  o.tokenizer_dir = tok.path();
  write_model_folder(small_config(), out.path(), o);
  EXPECT_EQ(read_file(out.path() / "tokenizer.json"), "{\"tok\":1}");
  EXPECT_EQ(read_file(out.path() / "merges.txt"), "a b\n");
  EXPECT_FALSE(std::filesystem::exists(out.path() / "vocab.json"));
  o.tokenizer_dir = bad.path();
  EXPECT_THROW(write_model_folder(small_config(), out.path(), o), ModelFolderError);
}

TEST(ModelWriter, PresetParameterCountsMatchPublishedQwen3Sizes) {
  // Independent arithmetic: per layer q, k, v, o, gate, up, down, 2 layer norms, q/k norm.
  auto count = [](int64_t h, int64_t inter, int64_t layers, int64_t qh, int64_t kvh, bool tied) {
    const int64_t hd = 128, vocab = 151936;
    const int64_t layer =
        h * qh * hd + 2 * h * kvh * hd + qh * hd * h + 3 * h * inter + 2 * h + 2 * hd;
    return vocab * h * (tied ? 1 : 2) + layers * layer + h;
  };
  EXPECT_EQ(parameter_count(model_preset("qwen3-0.6b")), count(1024, 3072, 28, 16, 8, true));
  EXPECT_EQ(parameter_count(model_preset("qwen3-1.7b")), count(2048, 6144, 28, 16, 8, true));
  EXPECT_EQ(parameter_count(model_preset("qwen3-4b")), count(2560, 9728, 36, 32, 8, true));
  EXPECT_EQ(parameter_count(model_preset("qwen3-8b")), count(4096, 12288, 36, 32, 8, false));
  EXPECT_EQ(parameter_count(model_preset("qwen3-14b")), count(5120, 17408, 40, 40, 8, false));
  EXPECT_EQ(parameter_count(model_preset("qwen3-32b")), count(5120, 25600, 64, 64, 8, false));
  // Published sizes (Qwen3 model cards): total and non-embedding, in billions.
  auto billions = [](int64_t n) { return static_cast<double>(n) / 1e9; };
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-0.6b"))), 0.596, 0.001);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-0.6b")) - 151936 * 1024), 0.44, 0.005);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-1.7b"))), 1.7, 0.05);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-1.7b")) - 151936 * 2048), 1.4, 0.05);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-4b"))), 4.0, 0.05);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-4b")) - 151936 * 2560), 3.6, 0.05);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-8b"))), 8.2, 0.05);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-8b")) - 2 * 151936 * 4096), 6.95, 0.05);
  // 14.8B (13.2B non-embedding) and 32.8B (31.2B), untied.
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-14b"))), 14.8, 0.05);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-14b")) - 2 * 151936 * 5120), 13.2, 0.05);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-32b"))), 32.8, 0.05);
  EXPECT_NEAR(billions(parameter_count(model_preset("qwen3-32b")) - 2 * 151936 * 5120), 31.2, 0.05);
  EXPECT_THROW(model_preset("qwen3-70b"), std::invalid_argument);
}

TEST(ModelWriter, TinyPresetsHaveTheRequestedShapes) {
  const ModelConfig& t = model_preset("tiny");
  EXPECT_EQ(t.head_dim, 64);
  EXPECT_EQ(t.num_attention_heads, 4);
  EXPECT_EQ(t.num_key_value_heads, 2);
  EXPECT_TRUE(t.tie_word_embeddings);
  const ModelConfig& t128 = model_preset("tiny-128");
  EXPECT_EQ(t128.head_dim, 128);
  EXPECT_EQ(t128.num_attention_heads, 8);
  EXPECT_EQ(t128.num_key_value_heads, 2);
  EXPECT_FALSE(t128.tie_word_embeddings);
}

TEST(ModelWriter, ParsesShardSizes) {
  EXPECT_EQ(parse_byte_size("2GB"), 2'000'000'000u);
  EXPECT_EQ(parse_byte_size("500MB"), 500'000'000u);
  EXPECT_EQ(parse_byte_size("1GiB"), 1u << 30);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  for (const char* bad : {"", "GB", "2TB", "-1GB", "0", "99999999999999999999GB"})
    EXPECT_THROW(parse_byte_size(bad), std::invalid_argument) << bad;
}

TEST(ModelWriter, ShardPlanKeepsOrderAndLimit) {
  std::vector<TensorSpec> specs = {{"a", {10}}, {"b", {10}}, {"c", {30}}, {"d", {5}}};
  const auto plan = plan_shards(specs, 2, 40);  // sizes 20, 20, 60, 10 bytes
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan[1], (std::vector<size_t>{2}));  // larger than the limit: alone
  EXPECT_EQ(plan[2], (std::vector<size_t>{3}));
}

}  // namespace
}  // namespace nanovllm
