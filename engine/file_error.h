// Errors of files the user named: what failed, which file, and why (the system's errno text),
// e.g. "cannot open the output file out/x.jsonl: No such file or directory".
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace nanovllm {

// Call right after the failing operation, before anything else can change errno.
inline std::runtime_error file_error(std::string_view what, const std::filesystem::path& path) {
  const int err = errno;
  std::string message = std::string(what) + " " + path.string();
  if (err != 0) message += std::string(": ") + std::strerror(err);
  return std::runtime_error(message);
}

}  // namespace nanovllm
