// The benchmark's figures from its measurements: vLLM's throughput fields, the median of each
// field over the runs, the spread, nulls where the CPU has no figure, the tp scaling.
#include <gtest/gtest.h>

#include "bench/nanovllm_bench_report.h"
#include "bench/nanovllm_bench_scaling.h"

namespace nanovllm::bench {
namespace {

using nlohmann::json;

RunMeasure measure(double elapsed_s, std::optional<double> limit_s = std::nullopt) {
  RunMeasure m;
  m.elapsed_s = elapsed_s;
  m.num_requests = 4;
  m.prompt_tokens = 100;
  m.output_tokens = 60;
  m.prefill_tokens = 100;
  m.decode_tokens = 56;
  m.prefill_s = 0.5;
  m.decode_s = 0.0;  // no decode step: S_TG has no figure
  m.limit_s = limit_s;
  return m;
}

TEST(BenchReport, RunFiguresAreVllmsThroughputFields) {
  const json r = run_json(measure(2.0, 1.0));
  EXPECT_DOUBLE_EQ(r["requests_per_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(r["total_tok_s"].get<double>(), 80.0);
  EXPECT_DOUBLE_EQ(r["output_tok_s"].get<double>(), 30.0);
  EXPECT_DOUBLE_EQ(r["prefill_tok_s"].get<double>(), 200.0);
  EXPECT_TRUE(r["decode_tok_s"].is_null());
  EXPECT_DOUBLE_EQ(r["pct_of_limit"].get<double>(), 50.0);
  EXPECT_TRUE(r["gpu_s"].is_null());
}

TEST(BenchReport, ChunkedPrefillFieldsAreNullUnlessMeasured) {
  const json r = run_json(measure(2.0));
  for (const char* key :
       {"flop_count", "prefill_flop_pct", "max_gap_ms", "baseline_max_gap_ms", "long_ttft_ms"})
    EXPECT_TRUE(r.at(key).is_null()) << key;
  Workload w{"fixed n=1", "fixed"};
  const json j = workload_json(w, {measure(2.0)});
  EXPECT_TRUE(j.at("flop_count").is_null());
  EXPECT_TRUE(j.at("prefill_flop_pct").is_null());
  EXPECT_TRUE(j.at("interference").is_null());
}

TEST(BenchReport, InterferenceAndFlopsAreMediansOverTheRuns) {
  std::vector<RunMeasure> runs;
  for (const double gap : {30.0, 10.0, 20.0}) {
    RunMeasure m = measure(2.0, 1.0);
    m.interference = InterferenceMeasure{gap, gap / 10, 2 * gap};
    m.flop_count = 1e15;
    m.prefill_flop_pct = gap;
    runs.push_back(m);
  }
  Workload w{"interference", "interference"};
  w.requests.resize(2);
  w.late_requests.resize(1);
  const json j = workload_json(w, runs);
  EXPECT_EQ(j["num_requests"], 3);
  ASSERT_TRUE(j["interference"].is_object());
  EXPECT_DOUBLE_EQ(j["interference"]["max_gap_ms"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(j["interference"]["baseline_max_gap_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["interference"]["long_ttft_ms"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(j["flop_count"].get<double>(), 1e15);
  EXPECT_DOUBLE_EQ(j["prefill_flop_pct"].get<double>(), 20.0);
  EXPECT_DOUBLE_EQ(j["runs"][0]["max_gap_ms"].get<double>(), 30.0);
}

TEST(BenchReport, NoLimitMeansNullPercent) {
  const json r = run_json(measure(2.0));
  EXPECT_TRUE(r["limit_s"].is_null());
  EXPECT_TRUE(r["pct_of_limit"].is_null());
  EXPECT_TRUE(r["decode_pct_of_limit"].is_null());
}

TEST(BenchReport, DecodePercentIsTheDecodeStepsLimitOverTheirTime) {
  RunMeasure m = measure(2.0, 1.0);
  m.decode_s = 1.5;
  m.decode_limit_s = 0.6;
  const json r = run_json(m);
  EXPECT_DOUBLE_EQ(r["decode_pct_of_limit"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(r["pct_of_limit"].get<double>(), 50.0);  // the whole run's, unchanged
  m.decode_s = 0.0;                                         // no decode step: no figure
  EXPECT_TRUE(run_json(m)["decode_pct_of_limit"].is_null());
}

TEST(BenchReport, MedianIsPerFieldAndSpreadIsOverOutputRate) {
  Workload w{"w", "fixed"};
  w.requests.resize(4);
  const json j = workload_json(w, {measure(2.0), measure(1.0), measure(4.0)});
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_DOUBLE_EQ(j["median"]["elapsed_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["median"]["output_tok_s"].get<double>(), 30.0);  // 60/4, 60/2, 60/1
  EXPECT_TRUE(j["median"]["output_tokens"].is_number_integer());
  EXPECT_EQ(j["median"]["output_tokens"].get<int64_t>(), 60);
  EXPECT_TRUE(j["median"]["pct_of_limit"].is_null());
  EXPECT_NEAR(j["spread_pct"].get<double>(), 100.0 * (60.0 - 15.0) / 30.0, 1e-9);
  EXPECT_TRUE(j["limit_breakdown_s"].is_null());

  const json two = median_run(json::array({{{"x", 1.0}}, {{"x", 2.0}}}));
  EXPECT_DOUBLE_EQ(two["x"].get<double>(), 1.5);
}

TEST(BenchReport, MachineWithoutLimitsIsAllNull) {
  const json m = machine_json(std::nullopt);
  for (const char* key : {"device", "sm_count", "copy_bandwidth_gbs", "bf16_tflops"})
    EXPECT_TRUE(m[key].is_null()) << key;
  MachineLimits limits{"GPU", 132, 3e12, 8e14};
  const json g = machine_json(limits);
  EXPECT_DOUBLE_EQ(g["copy_bandwidth_gbs"].get<double>(), 3000.0);
  EXPECT_DOUBLE_EQ(g["bf16_tflops"].get<double>(), 800.0);
}

TEST(BenchReport, ScalingIsSpeedupAndEfficiencyOverTheFirstSize) {
  auto result = [](int tp, double rate) {
    return json{
        {"tp", tp},
        {"workloads", json::array({{{"name", "nanovllm"}, {"median", {{"output_tok_s", rate}}}}})}};
  };
  const json s = scaling_json({result(1, 100.0), result(2, 150.0)});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["workload"], "nanovllm");
  EXPECT_EQ(s[0]["tp"], json::array({1, 2}));
  EXPECT_DOUBLE_EQ(s[0]["speedup"][1].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(s[0]["efficiency_pct"][1].get<double>(), 75.0);
}

}  // namespace
}  // namespace nanovllm::bench
