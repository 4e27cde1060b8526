// One tensor-parallel size of the benchmark, in a fresh process (the orchestrator execs the
// benchmark again with --child-tp and --child-json): the launcher's processes for that size
// (launcher/rank_processes.h) with rank 0's body below, which
//   1. measures the machine's limits (CUDA; bench/machine_limits.h), before the model loads;
//   2. has the model loaded (the launcher's factory) and wraps the executor in a StepRecorder,
//      with step timing on (CUDA events, where the executor has them);
//   3. runs one warm-up request, then every workload --runs times, each on a fresh engine;
//   4. measures the decode step (CUDA);
//   5. dismisses the workers and writes its result JSON (bench/README.md) to --child-json.
// Start-up (1, 2, the warm-up request) is reported apart, never in a run's time. Progress
// (bench/nanovllm_bench_progress.h) goes to stderr. When the parent asks it to stop
// (bench/nanovllm_bench_stop.h) it ends its current step, dismisses the workers, says so in
// one line and exits 128 + the parent's signal, writing no JSON.
#pragma once

#include "bench/nanovllm_bench_options.h"

namespace nanovllm::bench {

// Exit status: 0 with the JSON written; 2 for a configuration that does not fit the model;
// 128 + signal when the parent stopped it; 1 on a failure (the message is on stderr).
int run_bench_child(const BenchOptions& options);

}  // namespace nanovllm::bench
