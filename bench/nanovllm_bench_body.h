// Rank 0's body of a benchmark process (bench/nanovllm_bench_child.h), in the process the
// launcher gives rank 0 (of the one engine, or of one replica under --dp):
//   1. measures the machine's limits (CUDA; bench/machine_limits.h), before the model loads;
//   2. has the model loaded (the launcher's factory) and wraps the executor in a StepRecorder,
//      with step timing on (CUDA events, where the executor has them);
//   3. runs one warm-up request, then every workload --runs times, each on a fresh engine;
//   4. measures the decode step (CUDA);
//   5. dismisses the workers and writes its result JSON (bench/README.md).
// Start-up (1, 2, the warm-up request) is reported apart, never in a run's time. Progress
// (bench/nanovllm_bench_progress.h) goes to stderr. When the parent asks it to stop
// (bench/nanovllm_bench_stop.h) it ends its current step, dismisses the workers, says so in
// one line and returns kExitInterrupted, writing no JSON.
//
// As one replica of several (ReplicaRole::replicas > 1) it runs the whole workload as the
// others do, meeting them at the barrier before every timed run (and once after the last),
// and records each run's start and end on the steady clock (CLOCK_MONOTONIC, the same clock in
// every process) as the workload entry's "run_clocks" for bench/nanovllm_bench_merge.h. Only
// replica 0 logs the progress and measures the decode step, after every replica's runs ended,
// so that nothing else runs beside it.
#pragma once

#include <filesystem>

#include "bench/nanovllm_bench_barrier.h"
#include "bench/nanovllm_bench_options.h"
#include "engine/job/run_job.h"
#include "launcher/run_settings.h"

namespace nanovllm::bench {

struct ReplicaRole {
  int replica = 0;
  int replicas = 1;
  ReplicaBarrier* barrier = nullptr;  // set when replicas > 1
};

// Returns 0 with the JSON written to `json_path`, kExitInterrupted when the parent asked to
// stop; throws on a failure (the launcher prints it with the rank's name).
int run_bench_body(const BenchOptions& options, const RunSettings& settings,
                   const std::filesystem::path& json_path, const ExecutorFactory& load_model,
                   const ReplicaRole& role = {});

}  // namespace nanovllm::bench
