// The composition root of a run: wires the engine side (rank 0's main, e.g. the JSONL job or
// the benchmark), the worker (rank/) and the ring (ipc/) into processes. With --tp 1 rank 0
// runs in this process with the model beside it (no ring); otherwise the launcher lays out
// the shared-memory segment, forks one process per rank and supervises them
// (ipc/README.md). Either way a stop signal (engine/job/interrupt.h) ends the run with one line
// on stderr naming it and exit status 128 + signal, finished results kept, and the stall
// watchdog (launcher/stall_monitor.h) ends a run whose ranks stop making progress.
#pragma once

#include <spdlog/common.h>

#include <functional>

#include "engine/job/run_job.h"
#include "launcher/run_settings.h"
#include "launcher/stall_watchdog.h"

namespace nanovllm {

// Rank 0's body: given the factory that loads the model (wrapped in the ring broadcaster
// under tensor parallelism), run and return rank 0's exit code (kExitOk,
// kExitRequestsFailed, kExitInterrupted).
using Rank0Main = std::function<int(const ExecutorFactory& load_model)>;

// --tp 1: rank 0 and the model in this process. Returns rank 0's exit code, 1 on a fatal
// error (printed with the rank), 128 + signal after a stop signal; a stall ends the process
// with exit status 1.
int run_single_process(const RunSettings& settings, const Rank0Main& rank0_main,
                       const StallPolicy& stall = {});

// --tp > 1: one forked process per rank under the Supervisor. Returns rank 0's exit code, or
// the supervisor's (a rank died or stalled: 1, a stop signal: 128 + signal) when the group was
// torn down.
int run_rank_processes(const RunSettings& settings, spdlog::level::level_enum log_level,
                       const Rank0Main& rank0_main, const StallPolicy& stall = {});

}  // namespace nanovllm
