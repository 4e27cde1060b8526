// nanovllm-bench's parent and one benchmark process (a tp size: this binary again with
// --child-tp/--child-json), as launcher/supervisor.h is for ranks:
//   - the worker runs in its own process group, so a terminal's Ctrl-C (or `timeout`, which
//     signals its process group) reaches the parent alone;
//   - it dies with the parent: PR_SET_PDEATHSIG(SIGKILL) right after fork, and a getppid()
//     check for a parent that died before that;
//   - while it runs the parent takes the stop signals (engine/job/interrupt.h: kStopSignals):
//     the first is passed on through the stop channel (bench/nanovllm_bench_stop.h), after
//     which the worker ends its current step and exits; a second one (300 ms or more after
//     the first: `timeout` sends one twice), or the worker still running `grace` after the
//     first, SIGKILLs it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace nanovllm::bench {

struct WorkerExit {
  int exit_code = 0;    // 128 + signal when killed
  int stop_signal = 0;  // the stop signal the parent received while the worker ran (0: none)
};

// Runs /proc/self/exe with `args` (argv[0] first) plus "--child-stop-fd N" and waits for it.
// Throws std::runtime_error when it cannot fork.
WorkerExit run_worker(const std::vector<std::string>& args,
                      std::chrono::milliseconds grace = std::chrono::seconds(10));

}  // namespace nanovllm::bench
