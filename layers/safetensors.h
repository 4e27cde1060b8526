// One .safetensors file: an 8-byte little-endian header length N, N bytes of JSON
// ({name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {...}}), then the
// data section that the offsets index. Every number in the header is checked against the
// file before any pointer is formed, so a truncated or corrupt file is a ModelFolderError
// naming the file, never a crash or an out-of-bounds read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "layers/mapped_file.h"

namespace nanovllm {

// Headers above this are refused (the reference implementation uses the same cap).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kBf16;   // BF16, F16 or F32; other dtypes are refused
  std::vector<int64_t> shape;   // [] is a scalar
  uint64_t begin = 0, end = 0;  // byte range within the data section
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  uint64_t data_offset = 0;                // 8 + N: where the data section starts in the file
  uint64_t data_size = 0;                  // file size - data_offset
  std::vector<SafetensorsTensor> tensors;  // sorted by begin offset; ranges do not overlap
};

// Parses and bounds-checks the header of the file whose bytes are `file`; `file_name` is
// only used in error messages.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& file_name);

// "BF16" -> DType::kBf16 etc.; returns false for dtypes we do not load.
bool safetensors_dtype(const std::string& s, DType* out);
const char* safetensors_dtype_name(DType t);

// A memory-mapped, validated file. Move-only (owns the mapping).
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_.path(); }
  const std::vector<SafetensorsTensor>& tensors() const { return header_.tensors; }
  // The tensor's bytes inside the mapping (valid while this object lives).
  const std::byte* data(const SafetensorsTensor& t) const {
    return file_.bytes().data() + header_.data_offset + t.begin;
  }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
};

}  // namespace nanovllm
