// nanovllm-bench's progress over its whole plan (issue 30): the ETA is the work left in tokens
// across every workload and repetition (a workload's own time per run once it has one), it is
// "?" until both kinds of step were measured for a second, and the lines name the workload,
// the repetition and the requests and tokens done. Before, the benchmark logged "0/256
// requests | ... | ETA ?" from the requests of one repetition, for minutes.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_plan.h"
#include "bench/nanovllm_bench_progress.h"

namespace nanovllm::bench {
namespace {

// Two workloads of 2 runs and a skipped one: a = 100 prompt + 50 output tokens a run (4
// requests), b = 10 + 100 (1 request).
BenchPlan two_workloads() {
  BenchPlan plan;
  plan.runs = 2;
  plan.workloads = {
      {"a", 4, 100, 50, ""}, {"b", 1, 10, 100, ""}, {"long", 64, 9999, 9999, "too long"}};
  return plan;
}

struct FakeClock {
  double t = 0;
};

struct Fixture {
  FakeClock clock;
  std::vector<std::string> lines;
  BenchProgress progress;
  explicit Fixture(BenchPlan plan)
      : progress(std::move(plan),
                 BenchProgressOptions{5.0, [this] { return clock.t; },
                                      [this](const std::string& l) { lines.push_back(l); }}) {}
  void step(bool prefill, double s, int64_t prompt, int64_t output, int64_t finished) {
    clock.t += s;
    progress.step(prefill, s, prompt, output, finished);
  }
};

TEST(BenchPlan, TotalsCountEveryRunOfWhatRuns) {
  const BenchPlan plan = two_workloads();
  EXPECT_EQ(plan.total_runs(), 4);
  EXPECT_EQ(plan.total_prompt_tokens(), 2 * (100 + 10));
  EXPECT_EQ(plan.total_output_tokens(), 2 * (50 + 100));
}

TEST(BenchProgress, NoEtaUntilBothStepKindsWereMeasuredForASecond) {
  Fixture f(two_workloads());
  EXPECT_FALSE(f.progress.eta_s());
  f.progress.begin_run("a", 1);
  f.step(true, 0.5, 100, 4, 0);  // prefill only: the decode rate is unknown
  EXPECT_FALSE(f.progress.eta_s());
  EXPECT_NE(f.progress.status().find("ETA ?"), std::string::npos) << f.progress.status();
  f.step(false, 0.2, 0, 4, 0);  // both kinds, but 0.7 s measured
  EXPECT_FALSE(f.progress.eta_s());
  f.step(false, 0.4, 0, 8, 0);  // 1.1 s
  EXPECT_TRUE(f.progress.eta_s());
}

TEST(BenchProgress, EtaIsTheTokensLeftOfEveryRunAtTheMeasuredRates) {
  Fixture f(two_workloads());
  f.progress.begin_run("a", 1);
  f.step(true, 0.5, 100, 4, 0);  // 0.005 s per prompt token
  f.step(false, 0.6, 0, 12, 0);  // 0.05 s per output token
  const double per_prompt = 0.005, per_output = 0.05;
  // No request has finished, yet the ETA is known: a's run 1 has 34 output tokens left, its
  // run 2 everything, b both runs.
  const double expected = 34 * per_output + (100 * per_prompt + 50 * per_output) +
                          2 * (10 * per_prompt + 100 * per_output);
  ASSERT_TRUE(f.progress.eta_s());
  EXPECT_NEAR(*f.progress.eta_s(), expected, 1e-9);
  EXPECT_NE(f.progress.status().find("a run 1/2: 0/4 requests, 16/50 output tokens"),
            std::string::npos)
      << f.progress.status();
  EXPECT_NE(f.progress.status().find("all runs: 100/220 prompt + 16/300 output tokens"),
            std::string::npos)
      << f.progress.status();
}

TEST(BenchProgress, AWorkloadWithAFinishedRunTakesItsOwnTimePerRun) {
  Fixture f(two_workloads());
  f.progress.begin_run("a", 1);
  f.step(true, 0.5, 100, 4, 0);
  f.step(false, 2.3, 0, 46, 4);
  f.progress.end_run(3.0);  // the run took 3 s wall time (steps plus the host's own work)
  const double per_prompt = 0.5 / 100, per_output = 2.3 / 46;
  const double b_left = 2 * (10 * per_prompt + 100 * per_output);
  ASSERT_TRUE(f.progress.eta_s());
  EXPECT_NEAR(*f.progress.eta_s(), 3.0 + b_left, 1e-9);  // a's run 2: 3 s, not its tokens
  f.progress.begin_run("a", 2);
  f.clock.t += 1.0;
  EXPECT_NEAR(*f.progress.eta_s(), 2.0 + b_left, 1e-9);  // 1 s into it
  f.clock.t += 5.0;
  EXPECT_NEAR(*f.progress.eta_s(), b_left, 1e-9);  // overdue: no negative time
  EXPECT_THROW(f.progress.begin_run("long", 1), std::invalid_argument);  // skipped
}

TEST(BenchProgress, LinesComeEveryIntervalAndAtEachRunsEnd) {
  Fixture f(two_workloads());
  f.progress.begin_run("b", 1);
  f.step(true, 1.0, 10, 1, 0);
  EXPECT_TRUE(f.lines.empty());
  f.step(false, 4.5, 0, 50, 0);  // 5.5 s since the run began
  ASSERT_EQ(f.lines.size(), 1u);
  EXPECT_NE(f.lines[0].find("b run 1/2: 0/1 requests, 51/100 output tokens"), std::string::npos)
      << f.lines[0];
  f.step(false, 4.5, 0, 49, 1);  // 4.5 s since that line: none
  EXPECT_EQ(f.lines.size(), 1u);
  f.progress.end_run(10.0);
  ASSERT_EQ(f.lines.size(), 2u);
  EXPECT_NE(f.lines[1].find("b run 1/2: 1/1 requests, 100/100 output tokens"), std::string::npos)
      << f.lines[1];
  EXPECT_NE(f.lines[1].find("all runs: 10/220 prompt + 100/300 output tokens, 0:10 elapsed"),
            std::string::npos)
      << f.lines[1];
  // b's run 2 takes 10 s; a (no run yet) goes by the token rates: 1 s / 10 prompt tokens,
  // 9 s / 99 decode tokens.
  const double a_left = 2 * (100 * 0.1 + 50 * (9.0 / 99));
  EXPECT_NEAR(*f.progress.eta_s(), 10.0 + a_left, 1e-9);
}

}  // namespace
}  // namespace nanovllm::bench
