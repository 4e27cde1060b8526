// What each rank process runs. Rank 0 owns the tokenizer, the requests, the scheduler and the
// block manager and drives the step loop; ranks 1..N-1 only execute the step commands rank 0
// broadcasts and know nothing of scheduling. With --tp 1 the launcher runs rank 0 in its own
// process, without a ring.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "engine/engine_config.h"
#include "engine/request.h"
#include "ipc/broadcast_ring.h"
#include "kernels/tensor.h"
#include "layers/communicator.h"
#include "layers/model_config.h"

namespace nanovllm {

// Everything a rank needs, fixed by the launcher before fork (every rank gets the same copy).
struct RunSettings {
  std::filesystem::path model_dir;
  std::filesystem::path prompts;
  std::optional<std::filesystem::path> output;  // unset: results go to stdout
  bool resume = false;                          // needs output
  int tp_size = 1;
  Device device = Device::CPU;
  int cpu_threads = 1;      // per rank: nproc / tp, at least 1
  double gpu_memory_utilization = 0.9;  // CUDA: KV cache sized from memory when blocks == 0
  bool enforce_eager = false;           // CUDA: no decode graphs
  ModelConfig model;        // config.json (+ generation_config.json)
  EngineConfig engine;      // validated; eos_token_ids set; num_kvcache_blocks 0 = measure (CUDA)
  SamplingOverrides cli_sampling;  // command-line defaults; the seed is not one of them:
  uint64_t seed = 0;               // --seed, the base of every derived request seed
};

// Exit codes of run_rank0.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRequestsFailed = 1;  // some request got an error result
inline constexpr int kExitInterrupted = 130;   // SIGINT: finished results kept

// The seed of a request that names none: a hash of its id under --seed, so its sampled tokens
// depend neither on --tp nor on which requests share its batches.
uint64_t derive_request_seed(uint64_t base_seed, std::string_view request_id);

// Rank 0: SIGINT sets a flag; the step loop stops after the current step, finished results
// stay written and the workers are told to exit.
void install_rank0_interrupt_handler();
// Workers ignore SIGINT: rank 0 ends their loop with an EXIT command once it stopped.
void ignore_interrupts();

// Rank 0's whole run: validate every request before loading weights, write error results for
// bad lines at once, load this rank's shard, generate, write each result as it finishes.
// `ring` is null with --tp 1. Returns kExitOk, kExitRequestsFailed or kExitInterrupted;
// throws on a fatal error (unreadable files, a dead peer, a bug).
int run_rank0(const RunSettings& settings, Communicator& comm, RingWriter* ring);

// Rank r >= 1: load this rank's shard, then ring read -> decode -> execute until an EXIT
// command or the end of the stream (returns 0). A dead writer throws IpcError.
int run_worker(const RunSettings& settings, Communicator& comm, RingReader& ring);

}  // namespace nanovllm
