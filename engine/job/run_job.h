// Rank 0's job (nanovllm-launch's application): read and validate every request of the
// prompts file before any weight is loaded, write error results for bad lines at once, have
// the model loaded, run the engine loop and write each result as it finishes, with progress
// on stderr (engine/progress.h: the start-up on its own line, rates over the generation time,
// an ETA from the tokens left). The launcher wires it: it passes a factory that loads the model
// (and, under tensor parallelism, wraps it in the ring broadcaster), called once validation has
// passed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "engine/engine_config.h"
#include "engine/request.h"
#include "engine/request_reader.h"
#include "ipc/step_executor.h"

namespace nanovllm {

struct JobSettings {
  std::filesystem::path model_dir;  // tokenizer.json, generation_config.json, the model's name
  std::filesystem::path prompts;
  std::optional<std::filesystem::path> output;  // unset: results go to stdout
  bool resume = false;                          // needs output
  int32_t vocab_size = 0;          // token ids the model can embed (>= the tokenizer's)
  EngineConfig engine;             // validated; num_kvcache_blocks comes from the executor
  SamplingOverrides cli_sampling;  // command-line defaults; the seed is not one of them:
  uint64_t seed = 0;               // --seed, the base of every derived request seed
  RequestShard shard;              // --shard K/N: the requests of the file this run answers
};

struct PreparedJob;  // engine/job/pending_work.h
struct ReplicaLink;  // engine/job/replica_link.h

// Exit codes of run_job.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRequestsFailed = 1;  // some request got an error result
inline constexpr int kExitInterrupted = 130;   // SIGINT: finished results kept

// A configuration that cannot run, found only once the model is loaded (the KV cache the
// memory allows is smaller than one sequence): exit status 2, as a usage error.
struct JobConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Loads the model once validation has passed; returns rank 0's executor. Not called at all
// when no request is left to run (the caller then dismisses the workers itself).
using ExecutorFactory = std::function<std::unique_ptr<StepExecutor>()>;

// Empty when `num_blocks` hold one sequence of max_model_len tokens; else the message saying
// the numbers and what to change.
std::string kv_cache_shortfall(int num_blocks, int block_size, int max_model_len);

// The seed of a request that names none: a hash of its id under --seed, so its sampled tokens
// depend neither on --tp nor on which requests share its batches.
uint64_t derive_request_seed(uint64_t base_seed, std::string_view request_id);

// Returns kExitOk, kExitRequestsFailed or kExitInterrupted; throws JobConfigError (see there)
// or another error when fatal (unreadable files, a dead peer, a bug). Ends by sending the
// workers an EXIT command when it loaded the model.
int run_job(const JobSettings& settings, const ExecutorFactory& load_model);

// One replica's job under data parallelism: the launcher prepared the requests (and wrote the
// validation errors) before fork; this replica loads its model, then claims requests through
// `link` while it has room for more sequences, appends its results to the shared output under
// link.exclusive_write, and publishes its totals. Its own start-up line and summary go to the
// log, prefixed with the replica. Same exit codes and errors as run_job.
int run_replica_job(const JobSettings& settings, const PreparedJob& job,
                    const ExecutorFactory& load_model, const ReplicaLink& link);

}  // namespace nanovllm
