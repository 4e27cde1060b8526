// One data-parallel benchmark result (--dp N) from its replicas' own (bench/nanovllm_bench_body.h:
// each replica ran the whole workload, every timed run started together, and each workload
// entry holds "run_clocks": [[start, end] per run], steady-clock seconds). The merged result
// has the shape of a single engine's (bench/README.md, "The benchmark JSON") with "dp": N, and
// the work of all the replicas:
//   - per workload: num_requests, prompt_tokens, max_output_tokens, output_tokens and
//     cached_tokens are the sums over the replicas (the work scales with them);
//   - per run i: elapsed_s = the latest end - the earliest start of run i over the replicas;
//     output_tokens (and cached_tokens, num_steps, flop_count) the sums; the rates those over
//     elapsed_s; limit_s the largest replica's (each replica has its own GPUs, so the
//     bandwidth and FLOP ceilings of N replicas are N times one's: N times the work takes one
//     replica's limit), pct_of_limit = 100 * limit_s / elapsed_s; ttft_ms and tpot_ms the mean
//     over the replicas (each has the same requests); every per-step figure (gpu_s,
//     prefill_s, decode_s, S_PP, S_TG, the decode limit, the interference gaps) null: each
//     replica steps on its own clock, so they stay per replica;
//   - median and spread_pct over the merged runs, as for one engine;
//   - "replicas": each replica's own entry of the workload (its runs, medians, run_clocks);
//   - limit_breakdown_s: replica 0's (the replicas run the same steps);
//   - startup: each figure's largest over the replicas (what the run waited for);
//   - machine, model, engine, sampling, decode_step(s): replica 0's (it measured the decode
//     step alone, after every replica's runs ended).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

namespace nanovllm::bench {

// `replicas`: replica 0's result first; at least one. Throws std::runtime_error when they do
// not hold the same workloads and runs.
nlohmann::json merge_replica_results(const std::vector<nlohmann::json>& replicas);

}  // namespace nanovllm::bench
