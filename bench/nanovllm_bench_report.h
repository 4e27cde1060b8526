// The benchmark's results as the JSON of bench/README.md ("The benchmark JSON") and as the
// human table on stdout, which is printed from that JSON (so a child's result file and the
// table can never disagree).
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/limit_model.h"
#include "bench/machine_limits.h"
#include "bench/nanovllm_bench_runner.h"
#include "bench/nanovllm_bench_workloads.h"

namespace nanovllm::bench {

inline constexpr double kSpreadWarnPct = 2.0;  // spread above this is worth a warning

// RUN: {elapsed_s, requests_per_s, total_tok_s, output_tok_s, limit_s, pct_of_limit, gpu_s,
// prefill_s, decode_s, prefill_tok_s, decode_tok_s, ttft_ms, tpot_ms, output_tokens,
// cached_tokens, num_steps, flop_count, prefill_flop_pct, max_gap_ms, baseline_max_gap_ms,
// long_ttft_ms}; null where the backend or the workload has no such figure.
nlohmann::json run_json(const RunMeasure& m);
// Each field's median over the runs (the mean of the middle two for an even count); null
// where any run has null.
nlohmann::json median_run(const nlohmann::json& runs);
// 100 * (max - min) / median of the runs' output_tok_s.
double spread_pct(const nlohmann::json& runs);
// One "workloads" entry from its repetitions (at least one).
nlohmann::json workload_json(const Workload& w, const std::vector<RunMeasure>& runs);

// "machine": the measured limits, every field null without them (CPU).
nlohmann::json machine_json(const std::optional<MachineLimits>& limits);
// "model": the folder's name and the limit model's shape of it.
nlohmann::json model_json(const std::string& name, const ModelShape& shape);

// OBJECT's KEY, or null where it has none: files of older versions lack newer keys, and a
// const json's operator[] on a missing key is undefined behaviour.
nlohmann::json optional_field(const nlohmann::json& object, const char* key);
// A figure for the tables: "-" where the JSON has null.
std::string table_number(const nlohmann::json& v, int decimals);

// The table of one configuration's result (bench/nanovllm_bench_scaling.h compares several).
void print_result(std::FILE* out, const nlohmann::json& result);

}  // namespace nanovllm::bench
