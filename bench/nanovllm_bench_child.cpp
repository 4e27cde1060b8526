#include "bench/nanovllm_bench_child.h"

#include <cstdio>
#include <exception>
#include <string>

#include "bench/nanovllm_bench_body.h"
#include "bench/nanovllm_bench_replicas.h"
#include "bench/nanovllm_bench_stop.h"
#include "launcher/logging.h"
#include "launcher/rank_processes.h"
#include "launcher/run_settings.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {

int run_bench_child(const BenchOptions& o) {
  const BenchLayout layout{o.child_tp, o.child_dp};
  configure_logging(o.log_level, "bench " + layout_name(layout));
  set_stop_fd(o.child_stop_fd);
  RunSettings settings;
  try {
    settings = make_run_settings(launch_options(o, layout.tp, layout.dp));
    apply_engine_flags(o, settings.job.engine);
    settings.knock_out_all_reduce = o.knock_out_all_reduce;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    return 1;
  }
  const Rank0Main body = [&](const ExecutorFactory& load_model) {
    return run_bench_body(o, settings, *o.child_json, load_model);
  };
  int rc = 1;
  if (settings.replicas > 1) {
    rc = run_bench_replicas(o, settings, *o.child_json);
  } else if (settings.tp_size == 1) {
    rc = run_single_process(settings, body);
  } else {
    try {
      rc = run_rank_processes(settings, o.log_level, body);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
      return 1;
    }
  }
  // Stopped at the parent's request: its signal's status, as the parent exits with.
  if (rc == kExitInterrupted && stop_signal() != 0) return 128 + stop_signal();
  return rc;
}

}  // namespace nanovllm::bench
