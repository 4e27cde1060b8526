// nanovllm-bench --dp end to end on the CPU backend (the built binary, tiny model): dp 1 and dp
// 2 in one invocation. Every replica runs the whole workload (ignore_eos: exactly its Σ
// max_tokens), so the dp-2 configuration generates exactly twice dp 1's tokens; the replicas
// start each run together (no replica starts run 2 before both ended run 1); the merged run's
// time is the earliest start to the latest end of the replicas' runs and its rate the tokens
// over it; the replicas' own entries are kept; the table says the work scaled; the replicas'
// own files are gone afterwards. A stop signal stops every replica and leaves nothing behind.
// Usage errors of --layouts / --dp are refused before any run.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/bench_spawn.h"
#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

struct DpRun {
  int exit_code = -1;
  pid_t pid = -1;
  Json json;
  std::string out, err;
};

DpRun run_bench(const std::string& tag, const std::vector<std::string>& workload_args) {
  const fs::path json = work_dir() / (tag + ".json");
  BenchSpawn s;
  s.args =
      tiny_cpu_bench_args(NANOVLLM_BENCH_BIN, tiny_model().string(), json.string(), workload_args);
  s.out = (work_dir() / (tag + ".out")).string();
  s.err = (work_dir() / (tag + ".err")).string();
  s.cwd = NANOVLLM_SOURCE_DIR;  // the committed workload file, found as from the checkout
  s.env = {{"NANOVLLM_SHM_PREFIX", unique_prefix()}};
  DpRun run;
  run.pid = spawn_bench(s);
  const std::optional<int> rc = wait_exit(run.pid, 180s);
  if (!rc) {
    ::kill(run.pid, SIGKILL);
    ::waitpid(run.pid, nullptr, 0);
    ADD_FAILURE() << "nanovllm-bench still running after 180 s";
  }
  run.exit_code = rc.value_or(-1);
  run.out = read_text(s.out);
  run.err = read_text(s.err);
  if (fs::exists(json)) run.json = Json::parse(read_text(json));
  return run;
}

TEST(NanovllmBenchDataParallel, EveryReplicaRunsTheWholeWorkloadAndTheRunsStartTogether) {
  REQUIRE_TOKENIZER();
  const DpRun run = run_bench("dp", {"--dp", "1,2", "--workloads", "nanovllm-cpu", "--runs", "2",
                                     "--max-requests", "4", "--token-scale", "0.02"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json& j = run.json;
  ASSERT_EQ(j["per_tp"].size(), 2u) << run.err;
  const Json& one = j["per_tp"][0];
  const Json& two = j["per_tp"][1];
  EXPECT_EQ(one["tp"], 1);
  EXPECT_EQ(one["dp"], 1);
  EXPECT_EQ(two["tp"], 1);
  EXPECT_EQ(two["dp"], 2);
  ASSERT_EQ(one["workloads"].size(), 1u);
  ASSERT_EQ(two["workloads"].size(), 1u);
  const Json& w1 = one["workloads"][0];
  const Json& w2 = two["workloads"][0];
  EXPECT_FALSE(w1.contains("replicas"));

  // ignore_eos: one engine generates exactly Σ max_tokens, the two replicas twice that.
  const int64_t tokens = w1["output_tokens"].get<int64_t>();
  EXPECT_EQ(tokens, w1["max_output_tokens"].get<int64_t>());
  EXPECT_GT(tokens, 0);
  EXPECT_EQ(w2["output_tokens"].get<int64_t>(), 2 * tokens);
  EXPECT_EQ(w2["max_output_tokens"].get<int64_t>(), 2 * tokens);
  EXPECT_EQ(w2["num_requests"].get<int64_t>(), 2 * w1["num_requests"].get<int64_t>());
  EXPECT_EQ(w2["prompt_tokens"].get<int64_t>(), 2 * w1["prompt_tokens"].get<int64_t>());

  // Each replica's own entry: the whole workload, its runs on the machine's one clock.
  const Json& replicas = w2["replicas"];
  ASSERT_EQ(replicas.size(), 2u);
  for (const Json& r : replicas) {
    EXPECT_EQ(r["output_tokens"].get<int64_t>(), tokens);
    ASSERT_EQ(r["runs"].size(), 2u);
    ASSERT_EQ(r["run_clocks"].size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(r["runs"][i]["output_tokens"].get<int64_t>(), tokens);
      const double start = r["run_clocks"][i][0].get<double>();
      const double end = r["run_clocks"][i][1].get<double>();
      EXPECT_NEAR(end - start, r["runs"][i]["elapsed_s"].get<double>(), 1e-6);
    }
  }
  // The barrier: neither replica starts run 2 before both ended run 1.
  const double run1_end = std::max(replicas[0]["run_clocks"][0][1].get<double>(),
                                   replicas[1]["run_clocks"][0][1].get<double>());
  for (const Json& r : replicas) EXPECT_GE(r["run_clocks"][1][0].get<double>(), run1_end);

  // The merged runs: the earliest start to the latest end, every replica's tokens.
  ASSERT_EQ(w2["runs"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE("run " + std::to_string(i + 1));
    const Json& m = w2["runs"][i];
    const double start = std::min(replicas[0]["run_clocks"][i][0].get<double>(),
                                  replicas[1]["run_clocks"][i][0].get<double>());
    const double end = std::max(replicas[0]["run_clocks"][i][1].get<double>(),
                                replicas[1]["run_clocks"][i][1].get<double>());
    const double elapsed = m["elapsed_s"].get<double>();
    EXPECT_NEAR(elapsed, end - start, 1e-6);
    // (1e-6: the clocks are ~1e4 s, so end - start loses a few ulps of the elapsed time)
    for (const Json& r : replicas)
      EXPECT_GE(elapsed, r["runs"][i]["elapsed_s"].get<double>() - 1e-6);
    EXPECT_EQ(m["output_tokens"].get<int64_t>(), 2 * tokens);
    EXPECT_NEAR(m["output_tok_s"].get<double>(), 2.0 * static_cast<double>(tokens) / elapsed, 1e-6);
    // Per-step figures stay per replica; the CPU has no limit.
    for (const char* key : {"prefill_s", "decode_s", "decode_tok_s", "gpu_s", "pct_of_limit"})
      EXPECT_TRUE(m[key].is_null()) << key;
  }
  EXPECT_EQ(w2["median"]["output_tokens"].get<int64_t>(), 2 * tokens);
  EXPECT_TRUE(two["decode_step"].is_null());  // CUDA only

  // The table says what scaled; the scaling rows name both configurations.
  EXPECT_NE(run.out.find("| tp 1 | dp 2 |"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("work x2: each of the 2 replicas runs the whole workload"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(j["scaling"][0]["dp"], Json::array({1, 2}));
  EXPECT_EQ(j["scaling"][0]["tp"], Json::array({1, 1}));
  EXPECT_NE(run.err.find("plan: 2 runs of each workload on the cpu backend, tp1xdp1, tp1xdp2"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("--tp 1 --dp 2: starting a benchmark process (2 replicas"),
            std::string::npos)
      << run.err;
  for (const char* replica : {"[replica 0 rank 0]", "[replica 1 rank 0]"})
    EXPECT_NE(run.err.find(replica), std::string::npos) << replica << "\n" << run.err;

  // No replica's own file (or any other of this run's) is left behind.
  const std::string mine = "nanovllm-bench-" + std::to_string(run.pid) + "-";
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    EXPECT_NE(e.path().filename().string().rfind(mine, 0), 0u) << e.path();
}

TEST(NanovllmBenchDataParallel, LayoutsRunExactlyTheListedConfigurations) {
  REQUIRE_TOKENIZER();
  const DpRun run =
      run_bench("layouts", {"--layouts", "dp2xtp1", "--workloads", "fixed", "--runs", "1",
                            "--num-seqs", "2", "--input-len", "8", "--output-len", "4"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(run.json.contains("per_tp"));  // one configuration: its result at the top
  EXPECT_EQ(run.json["dp"], 2);
  const Json& w = run.json["workloads"][0];
  EXPECT_EQ(w["name"], "fixed n=2");
  EXPECT_EQ(w["output_tokens"], 2 * 2 * 4);  // 2 replicas x 2 sequences x 4 tokens
  ASSERT_EQ(w["replicas"].size(), 2u);
  for (const Json& r : w["replicas"]) EXPECT_EQ(r["output_tokens"], 2 * 4);
}

// A stop signal reaches every replica (each says so, naming itself, whether mid-run or at the
// barrier), the parent exits 128 + signal, and no process, segment or file is left.
TEST(NanovllmBenchDataParallel, AStopSignalStopsEveryReplica) {
  REQUIRE_TOKENIZER();
  const fs::path json = work_dir() / "dp-stop.json", err = work_dir() / "dp-stop.err";
  BenchSpawn s;
  s.args = tiny_cpu_bench_args(NANOVLLM_BENCH_BIN, tiny_model().string(), json.string(),
                               {"--dp", "2", "--workloads", "fixed", "--num-seqs", "4",
                                "--input-len", "16", "--output-len", "200", "--runs", "100"});
  s.out = (work_dir() / "dp-stop.out").string();
  s.err = err.string();
  const std::string prefix = unique_prefix();
  s.env = {{"NANOVLLM_SHM_PREFIX", prefix}};
  const pid_t pid = spawn_bench(s);
  ASSERT_TRUE(wait_for_text(err, "fixed n=4 run 1/100:", 60s)) << read_text(err);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  const std::optional<int> rc = wait_exit(pid, 20s);
  if (!rc) ::kill(pid, SIGKILL);
  ASSERT_TRUE(rc.has_value()) << "nanovllm-bench still running 20 s after SIGTERM";
  EXPECT_EQ(*rc, 128 + SIGTERM) << read_text(err);
  std::vector<pid_t> left = processes_with(json.string());
  for (int i = 0; i < 250 && !left.empty(); ++i) {
    std::this_thread::sleep_for(20ms);
    left = processes_with(json.string());
  }
  for (const pid_t p : left) ::kill(p, SIGKILL);
  EXPECT_TRUE(left.empty()) << "replica processes outlived the parent";
  EXPECT_TRUE(segments(prefix).empty());
  EXPECT_FALSE(fs::exists(json));
  const std::string text = read_text(err);
  for (int d = 0; d < 2; ++d)
    EXPECT_NE(text.find("nanovllm-bench: the --tp 1 --dp 2 (replica " + std::to_string(d) +
                        ") benchmark process stopped (SIGTERM (Terminated) from nanovllm-bench)"),
              std::string::npos)
        << text;
  EXPECT_NE(text.find("nanovllm-bench: interrupted by SIGTERM (Terminated): the --tp 1 --dp 2 "
                      "benchmark process stopped"),
            std::string::npos)
      << text;
  for (const char* wrong : {"fatal", "killed by signal", "never arrived", "ended before"})
    EXPECT_EQ(text.find(wrong), std::string::npos) << wrong << " in\n" << text;
  const std::string mine = "nanovllm-bench-" + std::to_string(pid) + "-";
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    EXPECT_NE(e.path().filename().string().rfind(mine, 0), 0u) << e.path();
}

TEST(NanovllmBenchDataParallel, ConflictingOrBadLayoutsAreUsageErrors) {
  REQUIRE_TOKENIZER();
  const DpRun both = run_bench("layouts-tp", {"--layouts", "tp1xdp2", "--tp", "2"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--layouts names each configuration's tp and dp"), std::string::npos)
      << both.err;
  const DpRun bad = run_bench("layouts-bad", {"--layouts", "4x1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--layouts '4x1': expected tp<N>xdp<N> or dp<N>xtp<N>"), std::string::npos)
      << bad.err;
  const DpRun zero = run_bench("dp-zero", {"--dp", "1,0"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--dp: every size must be >= 1"), std::string::npos) << zero.err;
}

}  // namespace
}  // namespace nanovllm::testing
