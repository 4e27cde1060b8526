#include "layers/safetensors.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "layers/model_folder_error.h"

namespace nanovllm {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw ModelFolderError(file + ": " + what);
}

// A non-negative JSON integer that fits int64 (shapes, offsets).
bool as_count(const json& v, uint64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return *out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  const int64_t s = v.get<int64_t>();
  if (s < 0) return false;
  *out = static_cast<uint64_t>(s);
  return true;
}

SafetensorsTensor parse_entry(const std::string& file, const std::string& name, const json& e,
                              uint64_t data_size) {
  const std::string where = "tensor '" + name + "': ";
  if (!e.is_object()) fail(file, where + "expected an object");
  SafetensorsTensor t;
  t.name = name;

  if (!e.contains("dtype") || !e.at("dtype").is_string())
    fail(file, where + "missing or non-string 'dtype'");
  const std::string dtype = e.at("dtype").get<std::string>();
  if (!safetensors_dtype(dtype, &t.dtype))
    fail(file, where + "dtype '" + dtype + "' is not supported (BF16, F16, F32 are)");

  if (!e.contains("shape") || !e.at("shape").is_array())
    fail(file, where + "missing or non-list 'shape'");
  uint64_t numel = 1;
  for (const json& d : e.at("shape")) {
    uint64_t n = 0;
    if (!as_count(d, &n)) fail(file, where + "bad dimension " + d.dump() + " in 'shape'");
    if (__builtin_mul_overflow(numel, n, &numel))
      fail(file, where + "shape " + e.at("shape").dump() + " overflows");
    t.shape.push_back(static_cast<int64_t>(n));
  }
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(numel, uint64_t{dtype_size(t.dtype)}, &expected_bytes))
    fail(file, where + "shape " + e.at("shape").dump() + " overflows");

  if (!e.contains("data_offsets") || !e.at("data_offsets").is_array() ||
      e.at("data_offsets").size() != 2)
    fail(file, where + "'data_offsets' must be a list [begin, end]");
  const json& off = e.at("data_offsets");
  if (!as_count(off.at(0), &t.begin) || !as_count(off.at(1), &t.end))
    fail(file, where + "bad 'data_offsets' " + off.dump());
  if (t.begin > t.end) fail(file, where + "data_offsets " + off.dump() + ": begin > end");
  if (t.end > data_size)
    fail(file, where + "data_offsets " + off.dump() + " run past the data section (" +
                   std::to_string(data_size) + " bytes; truncated file?)");
  if (t.end - t.begin != expected_bytes)
    fail(file, where + "data_offsets " + off.dump() + " hold " + std::to_string(t.end - t.begin) +
                   " bytes but shape " + e.at("shape").dump() + " x " + dtype + " needs " +
                   std::to_string(expected_bytes));
  return t;
}

}  // namespace

bool safetensors_dtype(const std::string& s, DType* out) {
  if (s == "BF16")
    *out = DType::kBf16;
  else if (s == "F16")
    *out = DType::kF16;
  else if (s == "F32")
    *out = DType::kF32;
  else
    return false;
  return true;
}

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::kBf16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF32:
      return "F32";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU16:
      return "U16";
    case DType::kFp8E4M3:
      return "F8_E4M3";
    case DType::kI8:
      return "I8";
  }
  return "?";
}

SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& name) {
  if (file.size() < 8)
    fail(name, "truncated: " + std::to_string(file.size()) + " bytes, no header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint64_t>(file[static_cast<size_t>(i)]);
  if (n > kMaxSafetensorsHeaderBytes)
    fail(name, "header length " + std::to_string(n) + " is implausibly large");
  if (n > file.size() - 8)
    fail(name, "header length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(file.size()) + " bytes; truncated?)");
  SafetensorsHeader h;
  h.data_offset = 8 + n;
  h.data_size = file.size() - h.data_offset;

  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  if (n == 0 || text[0] != '{') fail(name, "header is not a JSON object");
  json j;
  try {
    j = json::parse(text, text + n);
  } catch (const json::exception& e) {
    fail(name, std::string("header is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(name, "header is not a JSON object");

  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") continue;  // free-form strings; nothing we need
    h.tensors.push_back(parse_entry(name, key, value, h.data_size));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  // Overlapping ranges mean a corrupt header (writers never alias tensors).
  const SafetensorsTensor* last = nullptr;  // the non-empty tensor ending furthest so far
  for (const SafetensorsTensor& cur : h.tensors) {
    if (cur.nbytes() == 0) continue;
    if (last != nullptr && cur.begin < last->end)
      fail(name, "tensors '" + last->name + "' and '" + cur.name + "' overlap");
    if (last == nullptr || cur.end > last->end) last = &cur;
  }
  return h;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile f;
  f.file_ = MappedFile::open(path);
  f.header_ = parse_safetensors(f.file_.bytes(), path.string());
  return f;
}

}  // namespace nanovllm
