// One stderr logger per process, named after who logs ("launcher", "rank 1"): results may go
// to stdout, so every log line goes to stderr.
#pragma once

#include <spdlog/common.h>

#include <string>

namespace nanovllm {

void configure_logging(spdlog::level::level_enum level, const std::string& who);

}  // namespace nanovllm
