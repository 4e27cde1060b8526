// nanovllm-bench: the end-to-end benchmark (bench/README.md). This process only orchestrates:
// it checks the flags against the model, says what will run (bench/nanovllm_bench_plan.h),
// then runs each configuration (a tp size, times dp replicas: bench/nanovllm_bench_layouts.h)
// in a fresh process of itself (the launcher forks its ranks before any CUDA call, so no
// configuration may share a process with another; bench/nanovllm_bench_worker.h), reads back
// each one's JSON, prints the tables on stdout and writes the combined JSON. Progress goes to
// stderr. A stop signal stops the running configuration's process first. Exit status: 0; 1
// when a configuration failed; 2 on a usage error; 128 + signal when stopped.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_child.h"
#include "bench/nanovllm_bench_options.h"
#include "bench/nanovllm_bench_plan.h"
#include "bench/nanovllm_bench_report.h"
#include "bench/nanovllm_bench_scaling.h"
#include "bench/nanovllm_bench_worker.h"
#include "engine/job/interrupt.h"
#include "launcher/gpu_probe.h"
#include "launcher/logging.h"
#include "launcher/run_settings.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The plan of the whole benchmark, before any process starts: the workloads as every size
// will build them (`s`: the first size's settings), what is skipped, how much work.
void announce_plan(const BenchOptions& o, RunSettings s) {
  apply_engine_flags(o, s.job.engine);
  const BenchPlan plan =
      make_plan(make_workloads(o, s.model.vocab_size), o.runs, s.job.engine.max_model_len);
  for (const std::string& line : describe_plan(plan, o)) spdlog::info("{}", line);
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

int bench_main(int argc, char** argv) {
  const BenchParse parse = parse_bench_options(argc, argv, visible_gpu_count());
  if (!parse.options) {
    std::fputs(parse.message.c_str(), parse.exit_code == 0 ? stdout : stderr);
    return parse.exit_code;
  }
  const BenchOptions& o = *parse.options;
  if (o.child_json) return run_bench_child(o);
  configure_logging(o.log_level, "bench");
  if (!parse.notice.empty()) spdlog::warn("{}", parse.notice);
  try {
    std::vector<RunSettings> settings;  // every configuration checked before any runs
    for (const BenchLayout& l : o.layouts)
      settings.push_back(make_run_settings(launch_options(o, l.tp, l.dp)));
    announce_plan(o, settings.front());
  } catch (const UsageError& e) {
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {  // an unreadable model folder or workload file
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    return 1;
  }

  std::vector<json> per_tp;  // one result per configuration (the name is older than --dp)
  int rc = 0;
  for (const BenchLayout& layout : o.layouts) {
    const int tp = layout.tp;
    const std::string name =
        layout.dp == 1 ? "--tp " + std::to_string(tp)
                       : "--tp " + std::to_string(tp) + " --dp " + std::to_string(layout.dp);
    const fs::path path =
        fs::temp_directory_path() /
        ("nanovllm-bench-" + std::to_string(::getpid()) + "-" + layout_name(layout) + ".json");
    if (layout.dp == 1)
      spdlog::info("{}: starting a benchmark process", name);
    else
      spdlog::info(
          "{}: starting a benchmark process ({} replicas, each running the whole "
          "workload: work x{})",
          name, layout.dp, layout.dp);
    std::vector<std::string> args(argv, argv + argc);
    args.insert(args.end(), {"--child-tp", std::to_string(tp), "--child-dp",
                             std::to_string(layout.dp), "--child-json", path.string()});
    const WorkerExit worker = run_worker(args);
    const int child_rc = worker.exit_code;
    std::error_code ec;
    if (worker.stop_signal != 0) {
      fs::remove(path, ec);
      std::fprintf(stderr,
                   "nanovllm-bench: interrupted by %s: the %s benchmark process stopped "
                   "(exit status %d); no results printed\n",
                   describe_signal(worker.stop_signal).c_str(), name.c_str(), child_rc);
      return 128 + worker.stop_signal;
    }
    if (child_rc != 0 || !fs::exists(path, ec)) {
      spdlog::error("{}: the benchmark process failed (exit status {})", name, child_rc);
      rc = child_rc == kExitUsage ? kExitUsage : 1;
      continue;
    }
    per_tp.push_back(read_json(path));
    fs::remove(path, ec);
  }
  if (per_tp.empty()) return rc;

  json out = per_tp.front();  // the first configuration at the top: what plot_bench.py draws
  if (per_tp.size() > 1) {
    out["per_tp"] = per_tp;
    out["scaling"] = scaling_json(per_tp);
  }
  for (const json& r : per_tp) print_result(stdout, r);
  if (per_tp.size() > 1) print_scaling(stdout, out["scaling"]);
  std::fflush(stdout);
  if (o.json) {
    std::ofstream file(*o.json);
    file << out.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "nanovllm-bench: cannot write %s\n", o.json->c_str());
      return 1;
    }
    spdlog::info("wrote {} (chart: python3 scripts/plot_bench.py {})", o.json->string(),
                 o.json->string());
  }
  return rc;
}

}  // namespace
}  // namespace nanovllm::bench

int main(int argc, char** argv) {
  return nanovllm::bench::bench_main(argc, argv);
}
