// nanovllm-launch: parses the flags, fixes the run's settings from the flags and the model's
// config.json, then runs rank 0's job (engine/job/) in this process (--tp 1) or in the first
// of the forked rank processes (launcher/rank_processes.h). Exit status: 0; 1 when a request
// failed, a rank died or stalled (--stall-timeout); 2 on a usage or configuration error;
// 128 + signal after a stop signal (130 after SIGINT, 129 after SIGHUP, ...).
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "engine/job/run_job.h"
#include "engine/request_reader.h"
#include "launcher/cli.h"
#include "launcher/data_parallel_job.h"
#include "launcher/logging.h"
#include "launcher/rank_processes.h"
#include "launcher/run_settings.h"
#include "launcher/stall_watchdog.h"
#include "launcher/usage_error.h"
#include "layers/model_folder_error.h"

namespace nanovllm {
namespace {

// A run with no requests leaves its results file as any other run would: created empty (or
// truncated), or, under --resume, as it was (created when missing). Throws when it cannot.
void leave_empty_results(const std::filesystem::path& output, bool resume) {
  std::ofstream file(output, std::ios::binary | (resume ? std::ios::app : std::ios::trunc));
  if (!file)
    throw std::runtime_error("cannot open the output file '" + output.string() +
                             "': " + std::strerror(errno));
}

int launch_main(int argc, char** argv) {
  const LaunchParse parse = parse_launch_options(argc, argv);
  if (!parse.options) {
    std::fputs(parse.message.c_str(), parse.exit_code == 0 ? stdout : stderr);
    return parse.exit_code;
  }
  const LaunchOptions& o = *parse.options;
  configure_logging(o.log_level, "launcher");
  if (!parse.notice.empty()) spdlog::warn("{}", parse.notice);
  RunSettings settings;
  try {
    if (!has_request_lines(o.prompts, o.shard)) {  // before any fork, weight or device
      spdlog::warn("no requests to run in {} (empty, or blank lines only)", o.prompts.string());
      if (o.output) leave_empty_results(*o.output, o.resume);
      return 0;
    }
    settings = make_run_settings(o);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
    return kExitUsage;
  } catch (const ModelFolderError& e) {  // no config.json, an unsupported model: configuration
    std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
    return 1;
  }
  const Rank0Main job = [&settings](const ExecutorFactory& load_model) {
    return run_job(settings.job, load_model);
  };
  const StallPolicy stall = stall_policy(o.stall_timeout_s, o.stall_log_interval_s);
  if (settings.tp_size == 1 && settings.replicas == 1)
    return run_single_process(settings, job, stall);
  try {
    if (settings.replicas > 1) return run_data_parallel(settings, o.log_level, stall);
    return run_rank_processes(settings, o.log_level, job, stall);
  } catch (const std::exception& e) {  // the segment could not be created, ...
    std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
    return 1;
  }
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) {
  return nanovllm::launch_main(argc, argv);
}
