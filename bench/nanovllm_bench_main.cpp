// nanovllm-bench: the end-to-end benchmark (bench/README.md). This process only orchestrates:
// it checks the flags against the model, then runs each tensor-parallel size in a fresh
// process of itself (the launcher forks its ranks before any CUDA call, so no size may share
// a process with another), reads back each one's JSON, prints the table on stdout and writes
// the combined JSON. Progress goes to stderr. Exit status: 0; 1 when a size failed; 2 on a
// usage error.
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_child.h"
#include "bench/nanovllm_bench_options.h"
#include "bench/nanovllm_bench_report.h"
#include "launcher/gpu_probe.h"
#include "launcher/logging.h"
#include "launcher/run_settings.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// This binary again with the same flags plus the child's; returns its exit status (128 +
// signal when killed).
int run_child(int argc, char** argv, int tp, const fs::path& json_path) {
  std::vector<std::string> args(argv, argv + argc);
  args.insert(args.end(), {"--child-tp", std::to_string(tp), "--child-json", json_path.string()});
  std::fflush(nullptr);  // nothing buffered may be written twice
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    std::vector<char*> child_argv;
    for (std::string& a : args) child_argv.push_back(a.data());
    child_argv.push_back(nullptr);
    ::execv("/proc/self/exe", child_argv.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
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
  for (const int tp : o.tp_sizes) {  // every size's flags checked before any size runs
    try {
      make_run_settings(launch_options(o, tp));
    } catch (const UsageError& e) {
      std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
      return kExitUsage;
    }
  }

  std::vector<json> per_tp;
  int rc = 0;
  for (const int tp : o.tp_sizes) {
    const fs::path path =
        fs::temp_directory_path() /
        ("nanovllm-bench-" + std::to_string(::getpid()) + "-tp" + std::to_string(tp) + ".json");
    spdlog::info("--tp {}: starting a benchmark process", tp);
    const int child_rc = run_child(argc, argv, tp, path);
    std::error_code ec;
    if (child_rc != 0 || !fs::exists(path, ec)) {
      spdlog::error("--tp {}: the benchmark process failed (exit status {})", tp, child_rc);
      rc = child_rc == kExitUsage ? kExitUsage : 1;
      continue;
    }
    per_tp.push_back(read_json(path));
    fs::remove(path, ec);
  }
  if (per_tp.empty()) return rc;

  json out = per_tp.front();  // the first size at the top: what plot_bench.py draws
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
