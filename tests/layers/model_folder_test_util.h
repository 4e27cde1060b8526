// Helpers shared by the model-folder tests: temporary folders, JSON files, and a minimal
// independent safetensors writer (so the reader is not only tested against our writer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nanovllm::testing {

// A fresh empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& path, const std::string& bytes);
std::string read_file(const std::filesystem::path& path);
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

// The bytes of a safetensors file with the given JSON header text and data section,
// built by hand: 8-byte little-endian length, header, data.
std::string safetensors_bytes(const std::string& header_json, const std::string& data);

// A real Qwen3-0.6B-style config.json (transformers 4 spelling) with the given changes.
nlohmann::json qwen3_config_json();

}  // namespace nanovllm::testing
