// What a benchmark will run, said before it starts: each workload with its requests and tokens
// per run, the repetitions, what is skipped and why, and the work in all. The benchmark
// process also counts its progress against it (bench/nanovllm_bench_progress.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_options.h"
#include "bench/nanovllm_bench_workloads.h"

namespace nanovllm::bench {

struct PlannedWorkload {
  std::string name;
  int64_t requests = 0;       // one run
  int64_t prompt_tokens = 0;  // one run
  int64_t output_tokens = 0;  // one run: Σ max_tokens (ignore_eos: what it generates)
  std::string skipped;        // why it does not run; empty: it runs
};

struct BenchPlan {
  std::vector<PlannedWorkload> workloads;  // in order, the skipped ones too
  int runs = 1;                            // repetitions of each
  // Over the runs of the workloads that run.
  int64_t total_runs() const;
  int64_t total_prompt_tokens() const;
  int64_t total_output_tokens() const;
};

// Empty when `w` fits max_model_len (or is not skipped for length), else why it is skipped.
std::string skip_reason(const Workload& w, int max_model_len);

BenchPlan make_plan(const std::vector<Workload>& workloads, int runs, int max_model_len);

// The lines that say it, e.g.
//   "plan: 3 runs of each workload on the cpu backend, --tp 1, each run on a fresh engine"
//   (with replicas the configurations by name: "..., tp1xdp1, tp1xdp2, each run ...")
//   "  nanovllm-cpu     16 requests,   1,008 prompt +  1,133 output tokens a run"
//   "  long           skipped: a sequence needs 33,024 tokens, ... "
//   "  decode-step    CUDA only: not measured on the CPU"
//   "in all: 15 runs, 36,012 prompt + 9,033 output tokens"
// (times the tp sizes when there are several; with replicas, times every replica of every
// configuration, since each runs the whole plan).
std::vector<std::string> describe_plan(const BenchPlan& plan, const BenchOptions& o);

// 12345 -> "12,345".
std::string with_commas(int64_t n);

}  // namespace nanovllm::bench
