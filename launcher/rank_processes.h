// The composition root of a run: wires the engine side (rank 0's main, e.g. the JSONL job or
// the benchmark), the worker (rank/) and the ring (ipc/) into processes. With --tp 1 and one
// replica, rank 0 runs in this process with the model beside it (no ring); otherwise the
// launcher lays out the shared-memory segment, forks one process per rank of every replica
// and supervises them (ipc/README.md). Either way a stop signal (engine/job/interrupt.h) ends
// the run with one line on stderr naming it and exit status 128 + signal, finished results
// kept, and the stall watchdog (launcher/stall_monitor.h) ends a run whose ranks stop making
// progress.
#pragma once

#include <spdlog/common.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "engine/job/interrupt.h"
#include "engine/job/run_job.h"
#include "launcher/run_segment.h"
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

// Several replicas, each a group of --tp rank processes with its own rank 0 (data
// parallelism; launcher/replica_groups.h is the launcher's).
class ReplicaGroupsJob {
 public:
  virtual ~ReplicaGroupsJob() = default;
  virtual int replicas() const = 0;
  // In the launcher, before fork, once the segment is laid out (the replicas inherit it).
  virtual void attach(const RunSegment& segment) = 0;
  // Replica `replica`'s rank 0, in its own process: as Rank0Main.
  virtual int rank0_main(int replica, const ExecutorFactory& load_model) = 0;
  // In the launcher, on every supervision tick (20 ms) while the ranks run.
  virtual void on_tick() = 0;
  // In the launcher once every process ended, before the closing line (a summary).
  virtual void on_end() = 0;
  // After a stop signal, what the closing line says was kept; nullopt: rank 0's report of a
  // single replica says it.
  virtual std::optional<InterruptedJob> kept_results() const = 0;
};

// Replica d on GPUs d * tp ... d * tp + tp - 1 of those visible (CUDA); every replica's ranks
// under one Supervisor, so a failed rank anywhere stops the whole run, named by replica and
// rank. Returns the worst replica's rank-0 exit code (a request failed: 1; a configuration
// error: 2), or the supervisor's as run_rank_processes.
int run_replica_groups(const RunSettings& settings, spdlog::level::level_enum log_level,
                       ReplicaGroupsJob& job, const StallPolicy& stall = {});

}  // namespace nanovllm
