// bench/nanovllm_bench_merge.h on hand-made replica results: a merged run spans the earliest
// start to the latest end and carries every replica's tokens; the limit is the largest
// replica's (N replicas on N times the GPUs); latencies are the replicas' mean; per-step
// figures are null; the work sums; start-up is the slowest replica's; replicas that ran other
// workloads are refused.
#include <gtest/gtest.h>

#include <stdexcept>

#include "bench/nanovllm_bench_merge.h"
#include "bench/nanovllm_bench_report.h"

namespace nanovllm::bench {
namespace {

using nlohmann::json;

// One RUN as run_json writes it (the figures the merge reads), `tokens` in `elapsed` seconds.
json run(int64_t tokens, double elapsed, double limit, double ttft) {
  RunMeasure m;
  m.elapsed_s = elapsed;
  m.num_requests = 4;
  m.prompt_tokens = 100;
  m.output_tokens = tokens;
  m.num_steps = 10;
  m.prefill_s = 0.1;
  m.decode_s = elapsed - 0.2;
  m.limit_s = limit;
  m.ttft_ms = ttft;
  m.tpot_ms = 2.0;
  return run_json(m);
}

// A replica's result: one workload of two runs at the given clocks.
json replica(int d, std::vector<json> runs, json clocks, double load_s) {
  json w{{"name", "nanovllm"},   {"kind", "nanovllm"},           {"shape", json::object()},
         {"num_requests", 4},    {"prompt_tokens", 100},         {"max_output_tokens", 50},
         {"output_tokens", 50},  {"cached_tokens", 0},           {"runs", runs},
         {"run_clocks", clocks}, {"limit_breakdown_s", nullptr}, {"interference", nullptr}};
  w["median"] = median_run(w["runs"]);
  w["spread_pct"] = spread_pct(w["runs"]);
  return {{"tp", 1},
          {"dp", 2},
          {"replica", d},
          {"startup", {{"load_s", load_s}, {"machine_limits_s", nullptr}}},
          {"workloads", json::array({w})},
          {"decode_step", nullptr}};
}

TEST(BenchMerge, RunsSpanTheReplicasAndCarryAllTheirTokens) {
  const json a = replica(0, {run(50, 2.0, 1.0, 10.0), run(50, 1.0, 0.5, 20.0)},
                         json::array({{100.0, 102.0}, {103.0, 104.0}}), 1.5);
  const json b = replica(1, {run(50, 2.5, 1.2, 30.0), run(50, 1.5, 0.4, 40.0)},
                         json::array({{100.1, 102.6}, {103.0, 104.5}}), 2.5);
  const json m = merge_replica_results({a, b});
  EXPECT_EQ(m["dp"], 2);
  EXPECT_FALSE(m.contains("replica"));
  EXPECT_DOUBLE_EQ(m["startup"]["load_s"].get<double>(), 2.5);  // the slowest replica's
  EXPECT_TRUE(m["startup"]["machine_limits_s"].is_null());

  const json& w = m["workloads"][0];
  EXPECT_EQ(w["num_requests"], 8);
  EXPECT_EQ(w["prompt_tokens"], 200);
  EXPECT_EQ(w["output_tokens"], 100);
  EXPECT_EQ(w["max_output_tokens"], 100);
  EXPECT_FALSE(w.contains("run_clocks"));
  ASSERT_EQ(w["replicas"].size(), 2u);
  EXPECT_EQ(w["replicas"][1]["run_clocks"], b["workloads"][0]["run_clocks"]);

  const json& r1 = w["runs"][0];
  EXPECT_NEAR(r1["elapsed_s"].get<double>(), 2.6, 1e-9);  // 100.0 -> 102.6
  EXPECT_EQ(r1["output_tokens"], 100);
  EXPECT_NEAR(r1["output_tok_s"].get<double>(), 100 / 2.6, 1e-9);
  EXPECT_NEAR(r1["total_tok_s"].get<double>(), (200 + 100) / 2.6, 1e-9);
  EXPECT_NEAR(r1["requests_per_s"].get<double>(), 8 / 2.6, 1e-9);
  EXPECT_DOUBLE_EQ(r1["limit_s"].get<double>(), 1.2);  // the largest replica's limit
  EXPECT_NEAR(r1["pct_of_limit"].get<double>(), 100 * 1.2 / 2.6, 1e-9);
  EXPECT_DOUBLE_EQ(r1["ttft_ms"].get<double>(), 20.0);
  EXPECT_EQ(r1["num_steps"], 20);
  for (const char* key : {"prefill_s", "decode_s", "prefill_tok_s", "decode_tok_s",
                          "decode_limit_s", "decode_pct_of_limit", "gpu_s"})
    EXPECT_TRUE(r1[key].is_null()) << key;
  const json every_key = run(1, 1, 1, 1);
  for (auto it = every_key.begin(); it != every_key.end(); ++it)
    EXPECT_TRUE(r1.contains(it.key())) << it.key();  // every key of a RUN

  const json& r2 = w["runs"][1];
  EXPECT_NEAR(r2["elapsed_s"].get<double>(), 1.5, 1e-9);
  EXPECT_DOUBLE_EQ(r2["limit_s"].get<double>(), 0.5);
  // Median and spread over the merged runs.
  EXPECT_NEAR(w["median"]["output_tok_s"].get<double>(), 0.5 * (100 / 2.6 + 100 / 1.5), 1e-9);
  EXPECT_NEAR(w["spread_pct"].get<double>(),
              100 * (100 / 1.5 - 100 / 2.6) / (0.5 * (100 / 2.6 + 100 / 1.5)), 1e-9);
}

TEST(BenchMerge, ReplicasThatRanOtherWorkIsRefused) {
  const json clocks = json::array({{0.0, 1.0}});
  const json a = replica(0, {run(50, 1.0, 1.0, 1.0)}, clocks, 1.0);
  json b = replica(1, {run(50, 1.0, 1.0, 1.0)}, clocks, 1.0);
  b["workloads"][0]["name"] = "fixed n=2";
  EXPECT_THROW(merge_replica_results({a, b}), std::runtime_error);
  json c = replica(1, {run(50, 1.0, 1.0, 1.0)}, clocks, 1.0);
  c["workloads"] = json::array();
  EXPECT_THROW(merge_replica_results({a, c}), std::runtime_error);
  EXPECT_THROW(merge_replica_results({}), std::runtime_error);
}

}  // namespace
}  // namespace nanovllm::bench
