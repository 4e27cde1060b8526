// The settings a benchmark process ran with, as bench/README.md's JSON objects: "sampling",
// "engine", a long workload's "chunking", and the model's name.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/nanovllm_bench_options.h"
#include "engine/engine_config.h"
#include "launcher/run_settings.h"

namespace nanovllm::bench {

nlohmann::json sampling_json(const BenchOptions& o);
// The chunked-prefill settings a run had (also in "engine").
nlohmann::json chunking_json(const EngineConfig& e);
nlohmann::json engine_json(const EngineConfig& e, const RunSettings& s);
// The model folder's name ("qwen3-0.6b" for /models/qwen3-0.6b/).
std::string model_name(const std::filesystem::path& dir);

}  // namespace nanovllm::bench
