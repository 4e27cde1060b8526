#include "layers/model_config.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "layers/rope_scaling_config.h"

namespace nanovllm {
namespace {

using nlohmann::json;

// Field access with messages that name the file and the field.
class Fields {
 public:
  Fields(const json& j, const std::string& file) : j_(j), file_(file) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw ModelFolderError(file_ + ": field '" + field + "': " + what);
  }
  [[noreturn]] void unsupported(const std::string& field, const std::string& what) const {
    throw ModelFolderError(file_ + ": field '" + field + "': not supported: " + what);
  }
  bool has(const std::string& field) const { return j_.contains(field) && !j_.at(field).is_null(); }
  const json& at(const std::string& field) const {
    if (!has(field)) fail(field, "missing");
    return j_.at(field);
  }

  int64_t to_int(const json& v, const std::string& field) const {
    if (!v.is_number_integer()) fail(field, "expected an integer, got " + v.dump());
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(field, "integer out of range: " + v.dump());
    return v.get<int64_t>();
  }
  int64_t positive_int(const std::string& field) const {
    const int64_t v = to_int(at(field), field);
    if (v <= 0) fail(field, "must be positive, got " + std::to_string(v));
    // Our kernels index with int32 in places; anything this large is a broken file.
    if (v > (int64_t{1} << 31)) fail(field, "implausibly large: " + std::to_string(v));
    return v;
  }
  double number(const std::string& field) const { return number_of(at(field), field); }
  double number_of(const json& v, const std::string& field) const {
    if (!v.is_number()) fail(field, "expected a number, got " + v.dump());
    return v.get<double>();
  }
  bool boolean(const std::string& field, bool fallback) const {
    if (!has(field)) return fallback;
    const json& v = j_.at(field);
    if (!v.is_boolean()) fail(field, "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string string(const std::string& field) const {
    const json& v = at(field);
    if (!v.is_string()) fail(field, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  // An int or a list of ints (eos_token_id).
  std::vector<int32_t> int_list(const std::string& field) const {
    const json& v = at(field);
    std::vector<int32_t> out;
    auto one = [&](const json& e) {
      const int64_t id = to_int(e, field);
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        fail(field, "token id out of range: " + std::to_string(id));
      out.push_back(static_cast<int32_t>(id));
    };
    if (v.is_array()) {
      for (const json& e : v) one(e);
    } else {
      one(v);
    }
    return out;
  }

 private:
  const json& j_;
  const std::string& file_;
};

DType parse_dtype(const Fields& f, const std::string& field, const std::string& s) {
  if (s == "bfloat16") return DType::kBf16;
  if (s == "float16" || s == "half") return DType::kF16;
  if (s == "float32" || s == "float") return DType::kF32;
  f.unsupported(field, "dtype '" + s + "' (bfloat16, float16 and float32 are)");
}

void check_unsupported(const Fields& f, const json& config) {
  for (const char* moe : {"num_experts", "num_local_experts", "n_routed_experts"}) {
    if (f.has(moe) && !(config.at(moe).is_number() && config.at(moe).get<double>() == 0))
      f.unsupported(moe, "mixture-of-experts models");
  }
  if (f.has("quantization_config")) f.unsupported("quantization_config", "quantized weights");
  if (f.boolean("use_sliding_window", false))
    f.unsupported("use_sliding_window", "sliding-window attention");
  if (f.has("hidden_act") && f.string("hidden_act") != "silu")
    f.unsupported("hidden_act", "activation '" + f.string("hidden_act") + "' (only silu)");
}

// The model's own word on which tokens end generation: generation_config.json's
// eos_token_id replaces config.json's. Its sampling defaults are the engine's to read
// (engine/sampling_defaults.h), with the same rules as the command line and requests.
void parse_generation_eos(const json& gen, const std::string& name, ModelConfig& c) {
  if (!gen.is_object()) throw ModelFolderError(name + ": expected a JSON object");
  Fields g(gen, name);
  if (g.has("eos_token_id")) c.eos_token_ids = g.int_list("eos_token_id");
}

// architectures[0]: one of the decoders we implement.
void parse_architecture(const Fields& f, ModelConfig& c) {
  const json& archs = f.at("architectures");
  if (!archs.is_array() || archs.empty() || !archs.at(0).is_string())
    f.fail("architectures", "expected a non-empty list of names, got " + archs.dump());
  c.architecture = archs.at(0).get<std::string>();
  if (c.architecture != "Qwen3ForCausalLM" && c.architecture != "Qwen2ForCausalLM")
    f.unsupported("architectures",
                  "architecture '" + c.architecture + "' (Qwen3ForCausalLM, Qwen2ForCausalLM are)");
}

// Layer, head and vocabulary sizes, with the divisibility the attention layout needs.
void parse_shape(const Fields& f, bool qwen2, ModelConfig& c) {
  c.vocab_size = f.positive_int("vocab_size");
  c.hidden_size = f.positive_int("hidden_size");
  c.intermediate_size = f.positive_int("intermediate_size");
  c.num_hidden_layers = f.positive_int("num_hidden_layers");
  c.num_attention_heads = f.positive_int("num_attention_heads");
  c.num_key_value_heads =
      f.has("num_key_value_heads") ? f.positive_int("num_key_value_heads") : c.num_attention_heads;
  c.max_position_embeddings = f.positive_int("max_position_embeddings");
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    f.fail("num_key_value_heads", std::to_string(c.num_key_value_heads) +
                                      " does not divide num_attention_heads " +
                                      std::to_string(c.num_attention_heads));
  if (f.has("head_dim")) {
    c.head_dim = f.positive_int("head_dim");
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      f.fail("num_attention_heads", std::to_string(c.num_attention_heads) +
                                        " does not divide hidden_size " +
                                        std::to_string(c.hidden_size) + " (and no head_dim)");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  // Qwen2 derives head_dim from hidden_size; Qwen3 may differ (0.6B: 16 x 128 != 1024).
  if (qwen2 && c.head_dim * c.num_attention_heads != c.hidden_size)
    f.fail("head_dim", std::to_string(c.head_dim) + " x num_attention_heads " +
                           std::to_string(c.num_attention_heads) + " != hidden_size " +
                           std::to_string(c.hidden_size));
  if (c.head_dim % 2 != 0) f.fail("head_dim", "must be even for RoPE");
}

// RMSNorm epsilon and the RoPE base.
void parse_norm_and_rope(const Fields& f, const json& config, ModelConfig& c) {
  const double eps = f.number("rms_norm_eps");
  if (!(eps > 0 && eps < 1)) f.fail("rms_norm_eps", "must be in (0, 1)");
  c.rms_norm_eps = static_cast<float>(eps);

  // transformers 4 writes rope_theta, transformers 5 rope_parameters.rope_theta.
  double theta = 0;
  if (f.has("rope_parameters") && config.at("rope_parameters").contains("rope_theta")) {
    theta =
        f.number_of(config.at("rope_parameters").at("rope_theta"), "rope_parameters.rope_theta");
  } else if (f.has("rope_theta")) {
    theta = f.number("rope_theta");
  } else {
    f.fail("rope_theta", "missing (neither rope_theta nor rope_parameters.rope_theta)");
  }
  if (!(theta > 0)) f.fail("rope_theta", "must be positive");
  c.rope_theta = static_cast<float>(theta);
}

// Which optional tensors exist: tied lm_head, q/k/v bias (Qwen2), q/k norm (Qwen3).
void parse_tensor_layout(const Fields& f, bool qwen2, ModelConfig& c) {
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  if (qwen2) {
    c.attention_bias = true;  // Qwen2 always has q/k/v bias and no q/k norm
    c.qk_norm = false;
  } else {
    c.qk_norm = true;
    if (f.boolean("attention_bias", false))
      f.unsupported("attention_bias", "Qwen3 with attention biases (o_proj bias)");
    c.attention_bias = false;
  }
}

DType parse_weight_dtype(const Fields& f, const std::string& config_name) {
  // transformers 5 writes dtype, transformers 4 torch_dtype.
  if (f.has("dtype")) return parse_dtype(f, "dtype", f.string("dtype"));
  if (f.has("torch_dtype")) return parse_dtype(f, "torch_dtype", f.string("torch_dtype"));
  spdlog::warn("{}: no dtype or torch_dtype; assuming bfloat16", config_name);
  return DType::kBf16;
}

// bos from config.json; eos from generation_config.json when it names any, else config.json.
// Every eos id must be a row of the embedding.
void parse_special_tokens(const Fields& f, const std::string& config_name, const json* generation,
                          const std::string& generation_name, ModelConfig& c) {
  if (f.has("bos_token_id")) {
    const auto bos = f.int_list("bos_token_id");
    if (bos.size() != 1) f.fail("bos_token_id", "expected one token id");
    c.bos_token_id = bos[0];
  }
  if (f.has("eos_token_id")) c.eos_token_ids = f.int_list("eos_token_id");
  if (generation != nullptr) parse_generation_eos(*generation, generation_name, c);
  for (int32_t id : c.eos_token_ids) {
    if (id >= c.vocab_size)
      throw ModelFolderError((generation ? generation_name : config_name) +
                             ": field 'eos_token_id': " + std::to_string(id) +
                             " is not below vocab_size " + std::to_string(c.vocab_size));
  }
  if (c.eos_token_ids.empty())
    spdlog::warn("{}: no eos_token_id; generation stops only at max_tokens", config_name);
}

}  // namespace

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelFolderError(path.string() + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    throw ModelFolderError(path.string() + ": invalid JSON: " + e.what());
  }
}

ModelConfig parse_model_config(const json& config, const std::string& config_name,
                               const json* generation, const std::string& generation_name) {
  if (!config.is_object()) throw ModelFolderError(config_name + ": expected a JSON object");
  Fields f(config, config_name);
  ModelConfig c;
  parse_architecture(f, c);
  check_unsupported(f, config);
  const bool qwen2 = c.architecture == "Qwen2ForCausalLM";
  parse_shape(f, qwen2, c);
  parse_norm_and_rope(f, config, c);
  c.rope_scaling = parse_rope_scaling(config, config_name, c.max_position_embeddings);
  parse_tensor_layout(f, qwen2, c);
  c.dtype = parse_weight_dtype(f, config_name);
  parse_special_tokens(f, config_name, generation, generation_name, c);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& model_dir, const json* overrides) {
  const auto config_path = model_dir / "config.json";
  const auto generation_path = model_dir / "generation_config.json";
  json config = read_json_file(config_path);
  std::string config_name = config_path.string();
  if (overrides != nullptr && !overrides->empty()) {
    CHECK(overrides->is_object());
    if (!config.is_object()) throw ModelFolderError(config_name + ": expected a JSON object");
    for (const auto& [key, value] : overrides->items()) config[key] = value;  // vLLM's update
    config_name += " (with --hf-overrides / --rope-scaling)";
  }
  std::optional<json> generation;
  if (std::filesystem::exists(generation_path)) generation = read_json_file(generation_path);
  return parse_model_config(config, config_name, generation ? &*generation : nullptr,
                            generation_path.string());
}

}  // namespace nanovllm
