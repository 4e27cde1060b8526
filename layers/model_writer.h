// Writes a complete Hugging Face model folder with deterministic pseudo-random BF16 weights
// (config.json, generation_config.json, model.safetensors or shards + index, optionally
// the tokenizer files), so tests and benchmarks have real-shaped checkpoints without any
// download. Same config + seed -> byte-identical files.
// Weights come from random_weights.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "layers/model_config.h"
#include "layers/model_tensors.h"
#include "layers/random_weights.h"

namespace nanovllm {

struct ModelWriterOptions {
  std::string preset = "custom";  // recorded in config.json ("nanovllm_mkmodel")
  uint64_t seed = 0;
  uint64_t max_shard_bytes = 2'000'000'000;  // transformers' "2GB" (powers of 10)
  std::optional<std::filesystem::path> tokenizer_dir;
  int threads = 2;
};

// Tensor indices (into specs) per shard: greedy in model order; a shard is closed before a
// tensor that would push it past max_bytes (a tensor larger than max_bytes gets its own).
std::vector<std::vector<size_t>> plan_shards(const std::vector<TensorSpec>& specs,
                                             uint64_t bytes_per_element, uint64_t max_bytes);

nlohmann::json make_config_json(const ModelConfig& config, const ModelWriterOptions& options);
nlohmann::json make_generation_config_json(const ModelConfig& config);

// "2GB" = 2e9, "500MB", "1GiB" = 2^30, "123" bytes. Throws std::invalid_argument.
uint64_t parse_byte_size(const std::string& text);

// Creates out_dir if needed and writes the folder; throws std::runtime_error on I/O
// failure and ModelFolderError on a bad tokenizer dir.
void write_model_folder(const ModelConfig& config, const std::filesystem::path& out_dir,
                        const ModelWriterOptions& options);

}  // namespace nanovllm
