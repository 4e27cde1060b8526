// Counts the steps an executor completes, for the stall watchdog (launcher/stall_monitor.h):
// wraps rank 0's executor (the broadcaster under tensor parallelism) and each worker's model
// runner, so every rank counts the same steps. The counter lives where the watchdog can read
// it: the run's segment, or this process with --tp 1.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "ipc/step_executor.h"

namespace nanovllm {

class CountingStepExecutor final : public StepExecutor {
 public:
  // `steps` outlives this object.
  CountingStepExecutor(std::unique_ptr<StepExecutor> inner, std::atomic<uint64_t>& steps)
      : inner_(std::move(inner)), steps_(steps) {}

  // A PREFILL or DECODE step counts once it returned; EXIT is no step.
  StepResult execute(const StepCommand& cmd) override {
    StepResult result = inner_->execute(cmd);
    if (cmd.kind != StepKind::kExit) steps_.fetch_add(1, std::memory_order_relaxed);
    return result;
  }
  // Async scheduling: a step counts once collected.
  void launch(const StepCommand& cmd) override { inner_->launch(cmd); }
  StepResult collect() override {
    StepResult result = inner_->collect();
    steps_.fetch_add(1, std::memory_order_relaxed);
    return result;
  }
  bool accepts_pending_inputs(int num_seqs) const override {
    return inner_->accepts_pending_inputs(num_seqs);
  }
  int num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  bool set_step_timing(bool on) override { return inner_->set_step_timing(on); }
  std::optional<StepTiming> last_step_timing() const override { return inner_->last_step_timing(); }
  bool set_phase_timer(PhaseTimer* timer) override { return inner_->set_phase_timer(timer); }
  std::optional<StartupTiming> startup_timing() const override { return inner_->startup_timing(); }

 private:
  std::unique_ptr<StepExecutor> inner_;
  std::atomic<uint64_t>& steps_;
};

}  // namespace nanovllm
