// nanovllm-worker: rank R >= 1 of a tensor-parallel group whose rank 0 is embedded in another
// process (the C library, launcher/c_api.h), which spawned it:
//   nanovllm-worker --segment NAME --rank R --parent PID --options JSON
// It derives the run's settings from the same options as rank 0, maps the segment rank 0 laid
// out, and runs the launcher's worker body (launcher/worker_rank.h). It dies with its parent.
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/job/interrupt.h"
#include "ipc/shm_segment.h"
#include "kernels/check.h"
#include "launcher/engine_options.h"
#include "launcher/group_segment.h"
#include "launcher/logging.h"
#include "launcher/worker_rank.h"

namespace nanovllm {
namespace {

int worker_main(int argc, char** argv) {
  std::string segment_name, options_json;
  int rank = 0;
  pid_t parent = 0;
  CLI::App app{"A worker rank of an embedded nanovllm engine (started by the library).",
               "nanovllm-worker"};
  app.add_option("--segment", segment_name)->required();
  app.add_option("--rank", rank)->required()->check(CLI::Range(1, 1 << 16));
  app.add_option("--parent", parent)->required();
  app.add_option("--options", options_json)->required();
  CLI11_PARSE(app, argc, argv);
  // Die with the process that embeds rank 0; the getppid check closes the window before prctl.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return 1;
  set_check_rank(rank);
  const EngineOptions o = engine_options_from_json(nlohmann::json::parse(options_json));
  configure_logging(o.launch.log_level, "rank " + std::to_string(rank));
  // Until the model is loaded a stop signal ends the worker at once; then it ignores them.
  install_interrupt_handler(nullptr);
  const RunSettings s = make_run_settings(o.launch);
  const RunSegmentLayout layout = run_layout(s, 1);
  ShmSegment segment = ShmSegment::open(segment_name);
  CHECK_MSG(segment.size() >= layout.total, "segment " << segment_name << " holds "
                                                       << segment.size() << " bytes, the layout "
                                                       << layout.total);
  const RunSegment mapped = map_run_segment(segment.data(), layout);
  return run_worker_rank(s, layout, mapped.replicas[0], rank);
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) {
  try {
    return nanovllm::worker_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[nanovllm-worker] fatal: %s\n", e.what());
    return 1;
  }
}
