// How the configurations of one benchmark compare (tp sizes times dp replicas, the same
// workloads in the same order): the JSON's "scaling" and the table printed after each
// configuration's own (bench/nanovllm_bench_report.h).
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

namespace nanovllm::bench {

// Per workload each configuration's tp, dp, median output tok/s and % of limit, the speedup
// over the first configuration and the efficiency (speedup / (GPUs / the first's GPUs), GPUs
// = tp * dp; a result without "dp", older than --dp, has 1).
nlohmann::json scaling_json(const std::vector<nlohmann::json>& per_tp);

// A row per workload and configuration: tp, dp, GPUs, output tok/s, % of limit, ratio and
// efficiency against the first configuration.
void print_scaling(std::FILE* out, const nlohmann::json& scaling);

}  // namespace nanovllm::bench
