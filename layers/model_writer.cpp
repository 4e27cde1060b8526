#include "layers/model_writer.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "kernels/check.h"
#include "layers/safetensors_writer.h"

namespace nanovllm {

namespace fs = std::filesystem;

namespace {

// 1e-6f as 1e-06 in JSON, not 9.999999974752427e-07: the shortest float spelling, as double.
double clean(float f) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), f);
  return std::strtod(std::string(buf, res.ptr).c_str(), nullptr);
}

// The sampling defaults the published Qwen3 models (0.6B to 8B) ship in generation_config.json.
struct ShippedSampling {
  float temperature;
  int32_t top_k;
  float top_p;
};
constexpr ShippedSampling kQwen3Sampling{.temperature = 0.6f, .top_k = 20, .top_p = 0.95f};

const char* torch_dtype_name(DType t) {
  switch (t) {
    case DType::kF16:
      return "float16";
    case DType::kF32:
      return "float32";
    default:
      return "bfloat16";
  }
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(path.string() + ": write failed");
}

// One shard: header, then each tensor generated chunk by chunk (bounded memory even for
// the 8B embedding) and appended. Written under a temporary name, renamed when complete.
void write_shard(const fs::path& path, const std::vector<const TensorSpec*>& tensors,
                 const ModelConfig& config, const ModelWriterOptions& options) {
  std::vector<SafetensorsLayoutEntry> layout;
  for (const TensorSpec* s : tensors) layout.push_back({s->name, DType::kBf16, s->shape});
  const fs::path tmp = path.string() + ".partial";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(tmp.string() + ": cannot create");
  const std::string header = safetensors_header_bytes(layout, {{"format", "pt"}});
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  constexpr uint64_t kChunk = uint64_t{1} << 24;  // elements per generated chunk (32 MiB)
  std::vector<uint16_t> buf;
  for (const TensorSpec* s : tensors) {
    const uint64_t n = static_cast<uint64_t>(s->numel());
    for (uint64_t first = 0; first < n; first += kChunk) {
      const uint64_t count = std::min(kChunk, n - first);
      buf.resize(count);
      generate_weights(*s, config, options.seed, first, buf, options.threads);
      out.write(reinterpret_cast<const char*>(buf.data()),
                static_cast<std::streamsize>(count * sizeof(uint16_t)));
    }
  }
  out.close();
  if (!out) throw std::runtime_error(tmp.string() + ": write failed");
  fs::rename(tmp, path);
}

void copy_tokenizer(const fs::path& from, const fs::path& to) {
  for (const char* required : {"tokenizer.json", "tokenizer_config.json"}) {
    if (!fs::exists(from / required))
      throw ModelFolderError((from / required).string() + ": missing (--tokenizer-dir)");
  }
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                           "special_tokens_map.json", "added_tokens.json"}) {
    if (fs::exists(from / name))
      fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing);
  }
}

}  // namespace

std::vector<std::vector<size_t>> plan_shards(const std::vector<TensorSpec>& specs,
                                             uint64_t bytes_per_element, uint64_t max_bytes) {
  std::vector<std::vector<size_t>> shards;
  uint64_t current = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t bytes = static_cast<uint64_t>(specs[i].numel()) * bytes_per_element;
    if (shards.empty() || (current > 0 && current + bytes > max_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += bytes;
  }
  return shards;
}

nlohmann::json make_config_json(const ModelConfig& c, const ModelWriterOptions& options) {
  CHECK_EQ(c.architecture, std::string("Qwen3ForCausalLM"));
  nlohmann::json j;
  j["architectures"] = {c.architecture};
  j["model_type"] = "qwen3";
  j["attention_bias"] = c.attention_bias;
  j["attention_dropout"] = 0.0;
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids.front();
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["layer_types"] =
      std::vector<std::string>(static_cast<size_t>(c.num_hidden_layers), "full_attention");
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["max_window_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["rms_norm_eps"] = clean(c.rms_norm_eps);
  // transformers 5 spelling, plus transformers 4's for older readers.
  j["rope_parameters"] = {{"rope_theta", clean(c.rope_theta)}, {"rope_type", "default"}};
  j["rope_theta"] = clean(c.rope_theta);
  j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["dtype"] = torch_dtype_name(c.dtype);
  j["torch_dtype"] = torch_dtype_name(c.dtype);
  j["use_cache"] = true;
  j["use_sliding_window"] = false;
  j["vocab_size"] = c.vocab_size;
  j["nanovllm_mkmodel"] = {{"preset", options.preset}, {"seed", options.seed}};
  return j;
}

nlohmann::json make_generation_config_json(const ModelConfig& c) {
  nlohmann::json j;
  if (c.bos_token_id) {
    j["bos_token_id"] = *c.bos_token_id;
    j["pad_token_id"] = *c.bos_token_id;
  }
  j["eos_token_id"] = c.eos_token_ids;
  j["do_sample"] = true;
  // A Qwen3 folder ships Qwen3's sampling defaults, as the published ones do. ModelConfig
  // carries none: the engine reads them back from this file (engine/sampling_defaults.h).
  if (c.architecture == "Qwen3ForCausalLM") {
    j["temperature"] = clean(kQwen3Sampling.temperature);
    j["top_k"] = kQwen3Sampling.top_k;
    j["top_p"] = clean(kQwen3Sampling.top_p);
  }
  return j;
}

uint64_t parse_byte_size(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
  if (pos == 0) throw std::invalid_argument("bad size '" + text + "' (e.g. 2GB, 500MB, 1GiB)");
  uint64_t value = 0;
  std::from_chars(text.data(), text.data() + pos, value);
  const std::string unit = text.substr(pos);
  uint64_t mult = 0;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KB")
    mult = 1000;
  else if (unit == "MB")
    mult = 1000'000;
  else if (unit == "GB")
    mult = 1000'000'000;
  else if (unit == "KiB")
    mult = 1ULL << 10;
  else if (unit == "MiB")
    mult = 1ULL << 20;
  else if (unit == "GiB")
    mult = 1ULL << 30;
  else
    throw std::invalid_argument("bad size unit in '" + text + "' (B, KB, MB, GB, KiB, MiB, GiB)");
  uint64_t out = 0;
  if (value == 0 || __builtin_mul_overflow(value, mult, &out))
    throw std::invalid_argument("bad size '" + text + "'");
  return out;
}

void write_model_folder(const ModelConfig& config, const fs::path& out_dir,
                        const ModelWriterOptions& options) {
  fs::create_directories(out_dir);
  const std::vector<TensorSpec> specs = model_tensor_specs(config);
  const auto shards = plan_shards(specs, sizeof(uint16_t), options.max_shard_bytes);
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total_bytes = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    const std::string file = shards.size() == 1 ? "model.safetensors" : name;
    std::vector<const TensorSpec*> tensors;
    for (size_t i : shards[s]) {
      tensors.push_back(&specs[i]);
      weight_map[specs[i].name] = file;
      total_bytes += static_cast<uint64_t>(specs[i].numel()) * sizeof(uint16_t);
    }
    spdlog::info("writing {} ({} tensors)", (out_dir / file).string(), tensors.size());
    write_shard(out_dir / file, tensors, config, options);
  }
  // A stale single file or index from an earlier run would shadow or contradict this one.
  if (shards.size() == 1) {
    fs::remove(out_dir / "model.safetensors.index.json");
  } else {
    fs::remove(out_dir / "model.safetensors");
    nlohmann::json index;
    index["metadata"] = {{"total_size", total_bytes},
                         {"total_parameters", parameter_count(config)}};
    index["weight_map"] = weight_map;
    write_text(out_dir / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  write_text(out_dir / "config.json", make_config_json(config, options).dump(2) + "\n");
  write_text(out_dir / "generation_config.json",
             make_generation_config_json(config).dump(2) + "\n");
  if (options.tokenizer_dir) copy_tokenizer(*options.tokenizer_dir, out_dir);
}

}  // namespace nanovllm
