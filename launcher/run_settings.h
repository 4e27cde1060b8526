// Everything a run needs, fixed by the launcher before fork from the flags and the model's
// config.json (every rank gets the same copy): rank 0's job settings and the workers' model
// settings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "engine/job/run_job.h"
#include "kernels/tensor.h"
#include "launcher/cli.h"
#include "layers/model_config.h"
#include "rank/kv_cache_sizing.h"

namespace nanovllm {

struct RunSettings {
  std::filesystem::path model_dir;
  int tp_size = 1;
  int replicas = 1;  // --data-parallel-size: engines, each of tp_size ranks
  Device device = Device::kCpu;
  int cpu_threads = 1;                  // per rank: nproc / tp, at least 1
  double gpu_memory_utilization = 0.9;  // CUDA: KV cache sized from memory when blocks == 0
  bool enforce_eager = false;           // CUDA: no decode graphs
  bool custom_all_reduce = true;        // CUDA, --tp > 1: peer-memory all-reduce where it pays
  // CUDA, --tp > 1: nanovllm-bench --knock-out-all-reduce (a timing experiment, wrong outputs)
  bool knock_out_all_reduce = false;
  DType kv_cache_dtype = DType::kBf16;  // --kv-cache-dtype
  ModelConfig model;                    // config.json (+ generation_config.json)
  JobSettings job;  // rank 0: engine limits (validated), num_kvcache_blocks 0 = measure (CUDA)
};

// Throws UsageError for flags that do not fit the model or this machine (exit 2), before any
// weight loads; other exceptions for unreadable model folders. max_num_seqs is lowered to the
// completions the request file asks for (no more sequences can ever run; the log says so).
RunSettings make_run_settings(const LaunchOptions& options);

// The most tokens one step may carry on CUDA: its kernels put a step's tokens (and its
// sequences) on one grid dimension, whose limit this is.
inline constexpr int64_t kMaxCudaStepTokens = 65535;
// Throws UsageError, in the flags' words, when a step of `engine` could carry more tokens than
// that (ipc/step_limits.h's max_step_tokens: the budget, or fewer when max_num_seqs sequences
// of max_model_len tokens hold less). make_run_settings calls it on CUDA, before any load.
void check_cuda_step_tokens(const EngineConfig& engine);

// The sequences the prompts file asks for, counted before fork without parsing most lines:
// each non-blank line is one request of n completions (`n`, or an OpenAI line's `body.n`,
// read only from lines that mention "n"; a line that does not parse counts 1, the reader
// reports it later). Counting stops at `limit`; an unreadable file counts `limit`.
// Under --shard, only the shard's lines count.
int count_request_sequences(const std::filesystem::path& prompts, int limit,
                            const RequestShard& shard = {});

}  // namespace nanovllm
