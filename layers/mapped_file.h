// A read-only memory mapping of a whole file (move-only; unmaps on destruction). Weights
// stay in the page cache and are copied to the device once, never read into the heap.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace nanovllm {

class MappedFile {
 public:
  // Throws ModelFolderError naming the file when it cannot be opened or mapped.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void reset();

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;  // [size_] bytes, or null for an empty file
  size_t size_ = 0;
};

}  // namespace nanovllm
