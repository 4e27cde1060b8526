// nanovllm-bench on the CPU backend picks workloads sized for a CPU by default (issue 30):
// `all` holds nanovllm-cpu (nano-vllm's file cut to 16 requests at 1/8 of the lengths) instead
// of the whole 256-request workload, and the fixed / latency / shared-prefix sizes no flag sets
// are CpuSizes'; flags given win, `--workloads nanovllm` still runs the whole workload, and
// CUDA keeps the full sizes. The plan printed at the start says each workload's requests and
// tokens, the runs, what is skipped and the work in all. Before, `--device cpu` ran the full
// workloads (about 134k output tokens a run) without saying so.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_options.h"
#include "bench/nanovllm_bench_plan.h"
#include "bench/nanovllm_bench_selection.h"
#include "bench/nanovllm_bench_workloads.h"

namespace nanovllm::bench {
namespace {

BenchParse parse(std::vector<std::string> flags, const std::string& device = "cpu") {
  std::vector<std::string> args{"nanovllm-bench", std::filesystem::temp_directory_path().string(),
                                "--device", device};
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_bench_options(static_cast<int>(argv.size()), argv.data(), device == "cuda" ? 1 : 0);
}

const std::vector<std::string> kCpuAll{"nanovllm-cpu", "fixed", "latency", "shared-prefix",
                                       "decode-step"};

TEST(BenchCpuSizes, DefaultsOnTheCpuAreCpuSized) {
  const BenchParse p = parse({});
  ASSERT_TRUE(p.options) << p.message;
  const BenchOptions& o = *p.options;
  const CpuSizes cpu;
  EXPECT_EQ(o.workloads, kCpuAll);
  EXPECT_EQ(o.cpu_max_requests, 16);
  EXPECT_EQ(o.cpu_token_scale, 0.125);
  EXPECT_EQ(o.num_seqs, (std::vector<int>{1, 8}));
  EXPECT_EQ(o.input_len, cpu.input_len);
  EXPECT_EQ(o.output_len, cpu.output_len);
  EXPECT_EQ(o.prefix_requests, cpu.prefix_requests);
  EXPECT_EQ(o.prefix_len, cpu.prefix_len);
  EXPECT_EQ(o.suffix_len, cpu.suffix_len);
  EXPECT_EQ(o.prefix_output_len, cpu.prefix_output_len);
  EXPECT_EQ(parse({"--workloads", "all"}).options->workloads, kCpuAll);
}

TEST(BenchCpuSizes, FlagsGivenWinAndTheFullWorkloadRunsByName) {
  const BenchParse p = parse({"--num-seqs", "2,3", "--output-len", "7", "--max-requests", "5"});
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->num_seqs, (std::vector<int>{2, 3}));
  EXPECT_EQ(p.options->output_len, 7);
  EXPECT_EQ(p.options->input_len, CpuSizes{}.input_len);
  EXPECT_EQ(p.options->cpu_max_requests, 5);  // nanovllm-cpu takes the flag too
  EXPECT_EQ(p.options->cpu_token_scale, 0.125);

  const BenchParse full = parse({"--workloads", "nanovllm"});
  ASSERT_TRUE(full.options) << full.message;
  EXPECT_EQ(full.options->workloads, std::vector<std::string>{"nanovllm"});
  const std::vector<Workload> w = make_workloads(*full.options, 151936);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].name, "nanovllm");
  EXPECT_EQ(w[0].num_requests(), 256);
  EXPECT_EQ(w[0].max_output_tokens(), 133966);  // nano-vllm's whole workload
}

TEST(BenchCpuSizes, CudaKeepsTheFullSizes) {
  const BenchParse p = parse({}, "cuda");
  ASSERT_TRUE(p.options) << p.message;
  EXPECT_EQ(p.options->workloads, (std::vector<std::string>{"nanovllm", "fixed", "latency",
                                                            "shared-prefix", "decode-step"}));
  const BenchOptions defaults;
  EXPECT_EQ(p.options->num_seqs, defaults.num_seqs);
  EXPECT_EQ(p.options->input_len, defaults.input_len);
  EXPECT_EQ(p.options->prefix_requests, defaults.prefix_requests);
}

TEST(BenchCpuSizes, NanovllmCpuIsTheFilesFirst16RequestsAtAnEighth) {
  const BenchParse p = parse({"--workloads", "nanovllm-cpu"});
  ASSERT_TRUE(p.options) << p.message;
  const std::vector<Workload> w = make_workloads(*p.options, 151936);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].name, "nanovllm-cpu");
  EXPECT_EQ(w[0].kind, "nanovllm");
  ASSERT_EQ(w[0].num_requests(), 16);
  std::ifstream in(p.options->workload_file);
  int64_t prompt = 0, output = 0;
  std::string line;
  for (int i = 0; i < 16 && std::getline(in, line); ++i) {
    const nlohmann::json j = nlohmann::json::parse(line);
    prompt += static_cast<int64_t>(std::ceil(j.at("prompt_token_ids").size() / 8.0));
    output += static_cast<int64_t>(std::ceil(j.at("max_tokens").get<double>() / 8.0));
  }
  EXPECT_EQ(w[0].prompt_tokens(), prompt);
  EXPECT_EQ(w[0].max_output_tokens(), output);
  EXPECT_LT(output, 133966 / 100);  // under a hundredth of the whole workload's output
}

TEST(BenchCpuSizes, ThePlanSaysEveryWorkloadItsRunsAndTheWorkInAll) {
  BenchParse p = parse({"--workloads", "all,long", "--runs", "2"});
  ASSERT_TRUE(p.options) << p.message;
  const BenchOptions& o = *p.options;
  const std::vector<Workload> workloads = make_workloads(o, 151936);
  const BenchPlan plan = make_plan(workloads, o.runs, 4096);
  ASSERT_EQ(plan.workloads.size(),
            6u);  // nanovllm-cpu, fixed n=1, n=8, latency, shared-prefix, long
  EXPECT_FALSE(plan.workloads.back().skipped.empty());  // long needs 33k tokens
  int64_t prompt = 0, output = 0;
  for (size_t i = 0; i + 1 < workloads.size(); ++i) {
    prompt += 2 * workloads[i].prompt_tokens();
    output += 2 * workloads[i].max_output_tokens();
  }
  EXPECT_EQ(plan.total_prompt_tokens(), prompt);
  EXPECT_EQ(plan.total_output_tokens(), output);
  EXPECT_EQ(plan.total_runs(), 10);

  // The lines with each run of spaces as one (the columns' padding is not the point).
  std::string text;
  for (const std::string& l : describe_plan(plan, o)) {
    for (const char c : l)
      if (c != ' ' || text.empty() || text.back() != ' ') text += c;
    text += '\n';
  }
  EXPECT_NE(text.find("plan: 2 runs of each workload on the cpu backend, --tp 1"),
            std::string::npos)
      << text;
  const Workload& nv = workloads[0];
  EXPECT_NE(text.find("nanovllm-cpu 16 requests, " + with_commas(nv.prompt_tokens()) +
                      " prompt + " + with_commas(nv.max_output_tokens()) + " output tokens a run"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fixed n=8 8 requests, 1,024 prompt + 256 output tokens a run"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("long skipped: a sequence needs 32,505 tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("decode-step CUDA only"), std::string::npos) << text;
  EXPECT_NE(text.find("in all: 10 runs, " + with_commas(prompt) + " prompt + " +
                      with_commas(output) + " output tokens"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--workloads nanovllm runs the whole of it"), std::string::npos) << text;
}

}  // namespace
}  // namespace nanovllm::bench
