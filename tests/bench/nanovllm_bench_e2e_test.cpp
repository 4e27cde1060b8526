// nanovllm-bench end to end on the CPU backend: the built binary on the tiny random-weight
// model (real Qwen3 tokenizer files) at small sizes, every workload. Checks the values of
// its JSON, not only the keys: generated tokens are the workload's Σ max_tokens, the fixed
// rows' tokens are N·O, the shared prefix hits the cache (and does not with
// --no-enable-prefix-caching), figures the CPU has not are null, the medians and spreads are
// those of the runs, and --tp 1,2 runs both sizes with a scaling table.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

constexpr double kTokenScale = 0.02;  // --token-scale below
constexpr int kMaxRequests = 4;

struct BenchRun {
  int exit_code = -1;
  Json json;
  std::string out, err;
};

// nanovllm-bench on the tiny model with small engine limits, plus `extra`.
BenchRun run_bench(const std::string& tag, std::vector<std::string> extra) {
  const fs::path json_path = work_dir() / (tag + ".json"), out = work_dir() / (tag + ".out"),
                 err = work_dir() / (tag + ".err");
  std::vector<std::string> args{NANOVLLM_BENCH_BIN, tiny_model().string(), "--json",
                                json_path.string()};
  // Small engine limits keep each run to a second or so on 2 cores.
  for (const char* flag : {"--device=cpu", "--max-model-len=256", "--max-num-batched-tokens=256",
                           "--max-num-seqs=16", "--block-size=16", "--num-gpu-blocks-override=96"})
    args.emplace_back(flag);
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
    ::dup2(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    ::setenv("NANOVLLM_SHM_PREFIX", unique_prefix().c_str(), 1);
    // The committed workload file, found as from the repository root.
    if (::chdir(NANOVLLM_SOURCE_DIR) != 0) ::_exit(126);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  BenchRun run;
  const std::optional<int> rc = wait_exit(pid, 120s);
  if (!rc) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ADD_FAILURE() << "nanovllm-bench still running after 120 s";
  }
  run.exit_code = rc.value_or(-1);
  run.out = read_text(out);
  run.err = read_text(err);
  if (fs::exists(json_path)) run.json = Json::parse(read_text(json_path));
  return run;
}

// Σ of the first kMaxRequests lines' prompt lengths and max_tokens, scaled as the bench does.
std::pair<int64_t, int64_t> scaled_workload_sums() {
  std::ifstream in(std::string(NANOVLLM_SOURCE_DIR) + "/bench/data/nanovllm_workload.jsonl");
  int64_t prompt = 0, output = 0;
  std::string line;
  for (int i = 0; i < kMaxRequests && std::getline(in, line); ++i) {
    const Json j = Json::parse(line);
    auto scaled = [](int64_t n) {
      return std::max<int64_t>(
          1, static_cast<int64_t>(std::ceil(static_cast<double>(n) * kTokenScale)));
    };
    prompt += scaled(static_cast<int64_t>(j.at("prompt_token_ids").size()));
    output += scaled(j.at("max_tokens").get<int64_t>());
  }
  return {prompt, output};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The median and spread of a workload are those of its runs; the runs' rates are their counts
// over their times; the CPU has no limit and no CUDA-event time.
void expect_consistent(const Json& w) {
  SCOPED_TRACE(w["name"].get<std::string>());
  const Json& runs = w["runs"];
  ASSERT_FALSE(runs.empty());
  const double n = w["num_requests"].get<double>();
  std::vector<double> rates;
  for (const Json& r : runs) {
    const double t = r["elapsed_s"].get<double>();
    ASSERT_GT(t, 0.0);
    EXPECT_EQ(r["output_tokens"], w["output_tokens"]);  // ignore_eos: the same every run
    EXPECT_NEAR(r["requests_per_s"].get<double>(), n / t, 1e-9 * n / t);
    EXPECT_NEAR(r["output_tok_s"].get<double>(), r["output_tokens"].get<double>() / t, 1e-6);
    EXPECT_NEAR(r["total_tok_s"].get<double>(),
                (w["prompt_tokens"].get<double>() + r["output_tokens"].get<double>()) / t, 1e-6);
    if (r["pct_of_limit"].is_number()) {
      EXPECT_GT(r["pct_of_limit"].get<double>(), 0.0);
      EXPECT_LE(r["pct_of_limit"].get<double>(), 100.0);
    } else {
      EXPECT_TRUE(r["pct_of_limit"].is_null());
      EXPECT_TRUE(r["limit_s"].is_null());
    }
    EXPECT_TRUE(r["gpu_s"].is_null());
    EXPECT_LE(r["prefill_s"].get<double>() + r["decode_s"].get<double>(), t);
    rates.push_back(r["output_tok_s"].get<double>());
  }
  for (const auto& [key, value] : w["median"].items()) {
    std::vector<double> values;
    for (const Json& r : runs)
      if (r[key].is_number()) values.push_back(r[key].get<double>());
    if (values.size() != runs.size()) {
      EXPECT_TRUE(value.is_null()) << key;
      continue;
    }
    EXPECT_NEAR(value.get<double>(), median(values), 1e-9 * std::abs(median(values))) << key;
  }
  const double med = median(rates);
  const auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
  EXPECT_NEAR(w["spread_pct"].get<double>(), 100.0 * (*hi - *lo) / med, 1e-9);
}

const Json& workload(const Json& result, const std::string& name) {
  for (const Json& w : result["workloads"])
    if (w["name"] == name) return w;
  static const Json none;
  ADD_FAILURE() << "no workload " << name;
  return none;
}

TEST(NanovllmBenchE2E, EveryWorkloadOnTheCpuCountsTheRightTokens) {
  REQUIRE_TOKENIZER();
  const BenchRun run = run_bench("all", {"--workloads",
                                         "all",
                                         "--runs",
                                         "3",
                                         "--max-requests",
                                         std::to_string(kMaxRequests),
                                         "--token-scale",
                                         "0.02",
                                         "--num-seqs",
                                         "1,2",
                                         "--input-len",
                                         "16",
                                         "--output-len",
                                         "8",
                                         "--prefix-requests",
                                         "4",
                                         "--prefix-len",
                                         "64",
                                         "--suffix-len",
                                         "8",
                                         "--prefix-output-len",
                                         "4"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json& j = run.json;
  ASSERT_TRUE(j.is_object()) << run.err;

  EXPECT_EQ(j["tp"], 1);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["runs"], 3);
  for (const char* key : {"device", "sm_count", "copy_bandwidth_gbs", "bf16_tflops"})
    EXPECT_TRUE(j["machine"][key].is_null()) << key;
  EXPECT_EQ(j["model"]["name"], "tiny");
  EXPECT_EQ(j["model"]["num_hidden_layers"], 4);
  EXPECT_TRUE(j["decode_step"].is_null());  // CUDA only
  EXPECT_TRUE(j["startup"]["machine_limits_s"].is_null());
  EXPECT_GT(j["startup"]["load_s"].get<double>(), 0.0);
  EXPECT_GT(j["startup"]["warmup_request_s"].get<double>(), 0.0);
  EXPECT_EQ(j["sampling"]["mode"], "workload");
  EXPECT_TRUE(j["engine"]["enable_prefix_caching"].get<bool>());
  ASSERT_EQ(j["workloads"].size(), 5u);

  const auto [prompt_sum, output_sum] = scaled_workload_sums();
  const Json& nv = workload(j, "nanovllm-cpu");  // `all` on the CPU, sized by the flags
  EXPECT_EQ(nv["num_requests"], kMaxRequests);
  EXPECT_EQ(nv["prompt_tokens"], prompt_sum);
  EXPECT_EQ(nv["max_output_tokens"], output_sum);
  EXPECT_EQ(nv["output_tokens"], output_sum);
  EXPECT_EQ(nv["runs"].size(), 3u);

  for (const int n : {1, 2}) {
    const Json& f = workload(j, "fixed n=" + std::to_string(n));
    EXPECT_EQ(f["num_requests"], n);
    EXPECT_EQ(f["prompt_tokens"], n * 16);
    EXPECT_EQ(f["output_tokens"], n * 8);
    EXPECT_GT(f["median"]["prefill_tok_s"].get<double>(), 0.0);
    EXPECT_GT(f["median"]["decode_tok_s"].get<double>(), 0.0);
    EXPECT_EQ(f["shape"]["num_seqs"], n);
  }
  const Json& lat = workload(j, "latency");
  EXPECT_EQ(lat["num_requests"], 1);
  EXPECT_EQ(lat["output_tokens"], 8);
  EXPECT_GT(lat["median"]["ttft_ms"].get<double>(), 0.0);
  EXPECT_GT(lat["median"]["tpot_ms"].get<double>(), 0.0);

  const Json& sp = workload(j, "shared-prefix");
  EXPECT_EQ(sp["num_requests"], 4);
  EXPECT_EQ(sp["prompt_tokens"], 4 * (64 + 8));
  EXPECT_EQ(sp["output_tokens"], 4 * 4);
  EXPECT_GT(sp["cached_tokens"].get<int64_t>(), 0);
  EXPECT_LE(sp["cached_tokens"].get<int64_t>(), 3 * 64);  // the first request computes it

  for (const Json& w : j["workloads"]) expect_consistent(w);
  for (const char* name :
       {"workload", "nanovllm-cpu", "fixed n=2", "latency", "shared-prefix", "decode step"})
    EXPECT_NE(run.out.find(name), std::string::npos) << name << " not in the table:\n" << run.out;
  // Issue 30: the plan first (every workload, the runs, the work in all), then each run's
  // progress over the whole benchmark.
  const size_t plan = run.err.find("plan: 3 runs of each workload on the cpu backend, --tp 1");
  EXPECT_NE(plan, std::string::npos) << run.err;
  EXPECT_LT(plan, run.err.find("--tp 1: starting a benchmark process")) << run.err;
  EXPECT_NE(run.err.find("in all: 15 runs, "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("CUDA only: not measured on the CPU"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("nanovllm-cpu run 3/3: 4/4 requests, " + std::to_string(output_sum) + "/" +
                         std::to_string(output_sum) + " output tokens | all runs: "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("shared-prefix run 3/3: 4/4 requests, 16/16 output tokens | all runs: "),
            std::string::npos)
      << run.err;
}

TEST(NanovllmBenchE2E, NoPrefixCachingMeansNoCachedTokens) {
  REQUIRE_TOKENIZER();
  const BenchRun run =
      run_bench("nocache", {"--workloads", "shared-prefix", "--runs", "1", "--prefix-requests", "3",
                            "--prefix-len", "32", "--suffix-len", "4", "--prefix-output-len", "2",
                            "--no-enable-prefix-caching"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(run.json["engine"]["enable_prefix_caching"].get<bool>());
  const Json& sp = workload(run.json, "shared-prefix");
  EXPECT_EQ(sp["cached_tokens"], 0);
  EXPECT_EQ(sp["output_tokens"], 3 * 2);
}

TEST(NanovllmBenchE2E, TpListRunsEverySizeAndReportsScaling) {
  REQUIRE_TOKENIZER();
  const BenchRun run = run_bench(
      "tp", {"--tp", "1,2", "--workloads", "fixed", "--runs", "2", "--num-seqs", "2", "--input-len",
             "8", "--output-len", "4", "--sampling", "model-defaults", "--temperature", "0"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json& j = run.json;
  ASSERT_EQ(j["per_tp"].size(), 2u);
  EXPECT_EQ(j["per_tp"][0]["tp"], 1);
  EXPECT_EQ(j["per_tp"][1]["tp"], 2);
  EXPECT_EQ(j["tp"], 1);  // the first size at the top level (what plot_bench.py draws)
  for (const Json& r : j["per_tp"]) EXPECT_EQ(workload(r, "fixed n=2")["output_tokens"], 8);
  ASSERT_EQ(j["scaling"].size(), 1u);
  EXPECT_EQ(j["scaling"][0]["tp"], Json::array({1, 2}));
  EXPECT_DOUBLE_EQ(j["scaling"][0]["speedup"][0].get<double>(), 1.0);
  EXPECT_EQ(j["sampling"]["mode"], "model-defaults");
  EXPECT_EQ(j["sampling"]["model_defaults"]["top_k"], 20);  // the tiny folder's config
  EXPECT_EQ(j["sampling"]["flags"]["temperature"], 0.0);
  EXPECT_EQ(j["scaling"][0]["dp"], Json::array({1, 1}));  // no --dp: one engine each
  for (const Json& r : j["per_tp"]) EXPECT_EQ(r["dp"], 1);
  EXPECT_NE(run.out.find("scaling over the configurations"), std::string::npos) << run.out;
}

// long and interference need --max-model-len 33792 / 32016: at 256 both are skipped with a
// log line and the bench still succeeds; the chunked-prefill flags are in the engine JSON.
TEST(NanovllmBenchE2E, LongWorkloadsAreSkippedBelowTheirModelLenAndFlagsRecorded) {
  REQUIRE_TOKENIZER();
  const BenchRun run = run_bench(
      "chunkflags", {"--workloads", "long,interference", "--runs", "1",
                     "--long-prefill-token-threshold", "64", "--chunked-step-mode", "alternating"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.json["workloads"].size(), 0u);
  EXPECT_NE(run.err.find("long: skipped"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("interference: skipped"), std::string::npos) << run.err;
  const Json& e = run.json["engine"];
  EXPECT_TRUE(e["enable_chunked_prefill"].get<bool>());
  EXPECT_EQ(e["long_prefill_token_threshold"], 64);
  EXPECT_EQ(e["chunked_step_mode"], "alternating");
}

TEST(NanovllmBenchE2E, UnknownWorkloadIsAUsageError) {
  REQUIRE_TOKENIZER();
  const BenchRun run = run_bench("usage", {"--workloads", "nope"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("unknown workload 'nope'"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace nanovllm::testing
