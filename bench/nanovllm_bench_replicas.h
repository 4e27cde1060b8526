// A data-parallel benchmark process (--child-dp N > 1): N replicas of the engine, each a group
// of --tp ranks on its own GPUs, forked under one supervisor by the launcher's
// run_replica_groups (launcher/rank_processes.h: replica d sees GPUs d*tp ... d*tp + tp - 1).
// Every replica's rank 0 runs the benchmark body (bench/nanovllm_bench_body.h) on the whole
// workload, meeting the others at a barrier (bench/nanovllm_bench_barrier.h) before each timed
// run, and writes its own result to <json>.replica<d>; once every rank ended, this process
// merges them (bench/nanovllm_bench_merge.h) into <json> and removes them.
#pragma once

#include <filesystem>

#include "bench/nanovllm_bench_options.h"
#include "launcher/run_settings.h"

namespace nanovllm::bench {

// Replica d's own result file beside the merged one.
std::filesystem::path replica_json_path(const std::filesystem::path& merged, int replica);

// As run_bench_child's status: 0 with `json_path` written, 2 for a configuration that does not
// fit (too few GPUs), kExitInterrupted when stopped, 1 on a failure (the message on stderr).
int run_bench_replicas(const BenchOptions& options, const RunSettings& settings,
                       const std::filesystem::path& json_path);

}  // namespace nanovllm::bench
