#include "tests/layers/model_folder_test_util.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace nanovllm::testing {

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          ("nanovllm-h3a-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  write_file(path, j.dump(2));
}

std::string safetensors_bytes(const std::string& header_json, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header_json.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_json + data;
}

nlohmann::json qwen3_config_json() {
  // Values as published in Qwen/Qwen3-0.6B's config.json.
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
    "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})");
}

}  // namespace nanovllm::testing
