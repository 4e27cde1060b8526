#include "layers/safetensors_writer.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kernels/check.h"
#include "layers/safetensors.h"

namespace nanovllm {

uint64_t SafetensorsLayoutEntry::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::string safetensors_header_bytes(const std::vector<SafetensorsLayoutEntry>& entries,
                                     const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& e : entries) {
    CHECK_MSG(!header.contains(e.name), "duplicate tensor " << e.name);
    const uint64_t end = offset + e.nbytes();
    header[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsBlob>& blobs,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsLayoutEntry> layout;
  for (const auto& b : blobs) {
    CHECK_EQ(b.data.size(), b.layout.nbytes());
    layout.push_back(b.layout);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path.string() + ": cannot create");
  const std::string header = safetensors_header_bytes(layout, metadata);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const auto& b : blobs)
    out.write(reinterpret_cast<const char*>(b.data.data()),
              static_cast<std::streamsize>(b.data.size()));
  out.close();
  if (!out) throw std::runtime_error(path.string() + ": write failed");
}

}  // namespace nanovllm
