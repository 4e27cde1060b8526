// Everything a run needs, fixed by the launcher before fork from the flags and the model's
// config.json (every rank gets the same copy): rank 0's job settings and the workers' model
// settings.
#pragma once

#include <filesystem>

#include "engine/job/run_job.h"
#include "kernels/tensor.h"
#include "launcher/cli.h"
#include "layers/model_config.h"

namespace nanovllm {

struct RunSettings {
  std::filesystem::path model_dir;
  int tp_size = 1;
  Device device = Device::kCpu;
  int cpu_threads = 1;                  // per rank: nproc / tp, at least 1
  double gpu_memory_utilization = 0.9;  // CUDA: KV cache sized from memory when blocks == 0
  bool enforce_eager = false;           // CUDA: no decode graphs
  ModelConfig model;                    // config.json (+ generation_config.json)
  JobSettings job;  // rank 0: engine limits (validated), num_kvcache_blocks 0 = measure (CUDA)
};

// Throws UsageError for flags that do not fit the model (exit 2); other exceptions for
// unreadable model folders.
RunSettings make_run_settings(const LaunchOptions& options);

}  // namespace nanovllm
