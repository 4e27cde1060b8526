// Writing .safetensors files: the header for tensors laid out back to back in a given
// order (so large tensors can be streamed after it), and a one-call writer for small ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace nanovllm {

struct SafetensorsLayoutEntry {
  std::string name;
  DType dtype = DType::kBf16;
  std::vector<int64_t> shape;
  uint64_t nbytes() const;
};

// 8-byte little-endian length + JSON header padded with spaces to a multiple of 8 bytes
// (keeps every tensor 8-byte aligned in the file, as the reference writer does). Data of
// entries[i] must follow in order, without gaps.
std::string safetensors_header_bytes(const std::vector<SafetensorsLayoutEntry>& entries,
                                     const std::map<std::string, std::string>& metadata);

struct SafetensorsBlob {
  SafetensorsLayoutEntry layout;
  std::span<const std::byte> data;  // layout.nbytes() bytes
};

// Writes a complete file; throws std::runtime_error when the file cannot be written.
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsBlob>& blobs,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace nanovllm
