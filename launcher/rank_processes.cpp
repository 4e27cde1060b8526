#include "launcher/rank_processes.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "engine/job/interrupt.h"
#include "launcher/counting_step_executor.h"
#include "launcher/rank_entry.h"
#include "launcher/stall_monitor.h"
#include "launcher/usage_error.h"

namespace nanovllm {

namespace {

// --tp 1, from the watchdog's thread while the main thread hangs inside a step: _exit, since
// exit() would run destructors of objects that step is using. Results are written per line.
[[noreturn]] void exit_on_stall(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kLaunchProgram, message.c_str());
  std::fflush(stderr);
  ::_exit(1);
}

// One tensor-parallel group: a replica of one, running `rank0_main`.
class SingleGroupJob : public ReplicaGroupsJob {
 public:
  explicit SingleGroupJob(const Rank0Main& rank0_main) : rank0_main_(rank0_main) {}
  int replicas() const override { return 1; }
  void attach(const RunSegment&) override {}
  int rank0_main(int, const ExecutorFactory& load_model) override {
    return rank0_main_(load_model);
  }
  void on_tick() override {}
  void on_end() override {}
  std::optional<InterruptedJob> kept_results() const override { return std::nullopt; }

 private:
  const Rank0Main& rank0_main_;
};

}  // namespace

int run_single_process(const RunSettings& s, const Rank0Main& rank0_main,
                       const StallPolicy& stall) {
  install_interrupt_handler(kLaunchProgram);
  spdlog::info("rank 0 started (pid {})", ::getpid());
  std::atomic<uint64_t> steps{0};
  const InProcessStallMonitor watchdog(stall, steps, exit_on_stall);
  int rc = 1;
  try {
    SingleRankCommunicator comm;
    rc = rank0_main([&]() -> std::unique_ptr<StepExecutor> {
      auto executor = std::make_unique<CountingStepExecutor>(load_model_runner(s, comm), steps);
      poll_interrupts_from_now();  // the job's step loop comes next
      return executor;
    });
  } catch (const JobConfigError& e) {
    std::fprintf(stderr, "%s: %s\n", kLaunchProgram, e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    // A rank-0 body may give up on the flag by throwing (the benchmark): still the signal.
    if (!interrupt_requested()) {
      std::fprintf(stderr, "[rank 0] fatal: %s\n", e.what());
      return 1;
    }
  }
  if (interrupt_requested()) return announce_interruption(interrupt_signal(), interrupted_job());
  return rc;
}

int run_rank_processes(const RunSettings& s, spdlog::level::level_enum level,
                       const Rank0Main& rank0_main, const StallPolicy& stall) {
  SingleGroupJob job(rank0_main);
  return run_replica_groups(s, level, job, stall);
}

}  // namespace nanovllm
