// The composition root of a run: wires the engine side (rank 0's main, e.g. the JSONL job or
// the benchmark), the worker (rank/) and the ring (ipc/) into processes. With --tp 1 rank 0
// runs in this process with the model beside it (no ring); otherwise the launcher lays out
// the shared-memory segment, forks one process per rank and supervises them
// (ipc/README.md).
#pragma once

#include <functional>

#include <spdlog/common.h>

#include "engine/job/run_job.h"
#include "launcher/run_settings.h"

namespace nanovllm {

// Rank 0's body: given the factory that loads the model (wrapped in the ring broadcaster
// under tensor parallelism), run and return rank 0's exit code (kExitOk,
// kExitRequestsFailed, kExitInterrupted).
using Rank0Main = std::function<int(const ExecutorFactory& load_model)>;

// --tp 1: rank 0 and the model in this process. Returns rank 0's exit code, 1 on a fatal
// error (printed with the rank).
int run_single_process(const RunSettings& settings, const Rank0Main& rank0_main);

// --tp > 1: one forked process per rank under the Supervisor. Returns rank 0's exit code, or
// the supervisor's (a rank died, a signal) when the group was torn down.
int run_rank_processes(const RunSettings& settings, spdlog::level::level_enum log_level,
                       const Rank0Main& rank0_main);

}  // namespace nanovllm
