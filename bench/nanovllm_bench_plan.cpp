#include "bench/nanovllm_bench_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace nanovllm::bench {

namespace {

std::string list_of(const std::vector<int>& v) {
  std::string s;
  for (const int x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

// "--tp 1,2" while no configuration has replicas, else every configuration by name.
std::string layout_list(const BenchOptions& o) {
  std::vector<int> tp;
  std::string names;
  bool replicas = false;
  for (const BenchLayout& l : o.layouts) {
    tp.push_back(l.tp);
    names += (names.empty() ? "" : ", ") + layout_name(l);
    replicas = replicas || l.dp > 1;
  }
  return replicas ? names : "--tp " + list_of(tp);
}

// The work of every configuration together: a dp N one does the plan's work N times over.
std::string configurations_clause(const BenchOptions& o) {
  const size_t n = o.layouts.size();
  int replicas = 0, largest = 1;
  for (const BenchLayout& l : o.layouts) {
    replicas += l.dp;
    largest = std::max(largest, l.dp);
  }
  if (largest == 1) return n > 1 ? fmt::format(", for each of {} tp sizes", n) : "";
  return fmt::format(
      ", on each of the {} replicas of the {} configuration{} (a dp N configuration runs it "
      "on each of its N replicas: work xN)",
      replicas, n, n == 1 ? "" : "s");
}

}  // namespace

std::string with_commas(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out(n < 0 ? 1 : 0, '-');
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

int64_t BenchPlan::total_runs() const {
  int64_t n = 0;
  for (const PlannedWorkload& w : workloads) n += w.skipped.empty() ? runs : 0;
  return n;
}

int64_t BenchPlan::total_prompt_tokens() const {
  int64_t n = 0;
  for (const PlannedWorkload& w : workloads) n += w.skipped.empty() ? runs * w.prompt_tokens : 0;
  return n;
}

int64_t BenchPlan::total_output_tokens() const {
  int64_t n = 0;
  for (const PlannedWorkload& w : workloads) n += w.skipped.empty() ? runs * w.output_tokens : 0;
  return n;
}

std::string skip_reason(const Workload& w, int max_model_len) {
  if (!w.skip_when_too_long || w.longest_sequence() <= max_model_len) return "";
  return "a sequence needs " + with_commas(w.longest_sequence()) +
         " tokens, the engine's max_model_len is " + std::to_string(max_model_len) +
         " (run with --max-model-len " + std::to_string(w.longest_sequence()) + " or more)";
}

BenchPlan make_plan(const std::vector<Workload>& workloads, int runs, int max_model_len) {
  BenchPlan plan;
  plan.runs = runs;
  for (const Workload& w : workloads)
    plan.workloads.push_back(PlannedWorkload{w.name, w.num_requests(), w.prompt_tokens(),
                                             w.max_output_tokens(), skip_reason(w, max_model_len)});
  return plan;
}

std::vector<std::string> describe_plan(const BenchPlan& plan, const BenchOptions& o) {
  const bool cpu = o.device == Device::kCpu;
  std::vector<std::string> lines;
  lines.push_back(
      fmt::format("plan: {} run{} of each workload on the {} backend, {}, each run on "
                  "a fresh engine",
                  plan.runs, plan.runs == 1 ? "" : "s", cpu ? "cpu" : "cuda", layout_list(o)));
  size_t width = std::string("decode-step").size();
  for (const PlannedWorkload& w : plan.workloads) width = std::max(width, w.name.size());
  for (const PlannedWorkload& w : plan.workloads) {
    if (!w.skipped.empty()) {
      lines.push_back(fmt::format("  {:<{}}  skipped: {}", w.name, width, w.skipped));
      continue;
    }
    lines.push_back(fmt::format("  {:<{}}  {:>6} {:<9} {:>10} prompt + {:>9} output tokens a run",
                                w.name, width, with_commas(w.requests),
                                w.requests == 1 ? "request," : "requests,",
                                with_commas(w.prompt_tokens), with_commas(w.output_tokens)));
  }
  if (o.runs_workload("decode-step"))
    lines.push_back(
        cpu ? fmt::format("  {:<{}}  CUDA only: not measured on the CPU", "decode-step", width)
            : fmt::format("  {:<{}}  batch {} at {} tokens of context, 3 passes each",
                          "decode-step", width, list_of(o.decode_batches), o.decode_context));
  lines.push_back(fmt::format("in all: {} runs, {} prompt + {} output tokens{}", plan.total_runs(),
                              with_commas(plan.total_prompt_tokens()),
                              with_commas(plan.total_output_tokens()), configurations_clause(o)));
  if (cpu && o.runs_workload("nanovllm-cpu"))
    lines.push_back(
        "nanovllm-cpu is nano-vllm's workload cut to a CPU's size; --workloads nanovllm runs the "
        "whole of it (256 requests, 133,966 output tokens a run)");
  return lines;
}

}  // namespace nanovllm::bench
