// The embedded engine's keywords (the C library's options JSON, i.e. Python's LLM(**kwargs):
// nano-vllm's names and vLLM's) turned into nanovllm-launch's options, through the launcher's
// own parser, so every value gets the launcher's checks and messages. Shared by the library
// (rank 0) and the nanovllm-worker processes, which must derive the same settings.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "launcher/cli.h"

namespace nanovllm {

// Python's exception type for the failure ("TypeError", "ValueError") and its message.
struct EngineOptionError : std::runtime_error {
  EngineOptionError(std::string type, const std::string& message)
      : std::runtime_error(message), type(std::move(type)) {}
  std::string type;
};

struct EngineOptions {
  LaunchOptions launch;               // no prompts file
  std::filesystem::path worker_path;  // "worker_path"; empty: the caller's default
};

// Throws EngineOptionError: TypeError for an unknown keyword or a value of the wrong JSON
// type, ValueError for a value the launcher refuses (its message, the keyword named).
EngineOptions engine_options_from_json(const nlohmann::json& options);

}  // namespace nanovllm
