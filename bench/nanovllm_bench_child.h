// One configuration of the benchmark (a tp size, or tp x dp replicas), in a fresh process: the
// orchestrator execs the benchmark again with --child-tp, --child-dp and --child-json, since the
// launcher must fork its ranks before any CUDA call. This process runs the launcher's
// processes for that configuration (launcher/rank_processes.h) with rank 0's benchmark body
// (bench/nanovllm_bench_body.h): in this process for --tp 1, in the forked rank 0 for --tp > 1,
// and in every replica's rank 0 for --dp > 1 (bench/nanovllm_bench_replicas.h, which merges the
// replicas' results into one).
#pragma once

#include "bench/nanovllm_bench_options.h"

namespace nanovllm::bench {

// Exit status: 0 with the JSON written; 2 for a configuration that does not fit the model (or
// the GPUs); 128 + signal when the parent stopped it; 1 on a failure (the message is on stderr).
int run_bench_child(const BenchOptions& options);

}  // namespace nanovllm::bench
