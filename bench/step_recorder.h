// Rank 0's executor as the benchmark sees it: every command goes on to the executor the
// launcher's factory returned (the model runner, or the ring broadcaster under tensor
// parallelism), and the shape of each PREFILL / DECODE step is kept as a limit-model Step
// (bench/limit_model.h) with its host time and, when the executor times steps, its CUDA-event
// timing. So a run's limit is summed over the steps the engine really ran, chunking,
// preemptions and prefix-cache hits included.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bench/limit_model.h"
#include "ipc/step_executor.h"

namespace nanovllm::bench {

// The limit model's view of one PREFILL or DECODE command. Prefill: sequence b computes
// cu_seqlens_q[b+1] - cu_seqlens_q[b] new tokens and has cu_seqlens_k[b+1] - cu_seqlens_k[b]
// tokens of context after the step (cached + new); decode: one new token and context_lens[b].
// Logits rows: logits_indices.size().
Step step_of(const StepCommand& cmd);

struct RecordedStep {
  Step step;
  bool prefill = false;
  double host_s = 0;                 // execute() on the host, waiting for the tokens included
  std::optional<StepTiming> timing;  // the executor's, while its step timing is on
};

class StepRecorder final : public StepExecutor {
 public:
  explicit StepRecorder(std::unique_ptr<StepExecutor> inner);

  StepResult execute(const StepCommand& cmd) override;
  int num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  bool set_step_timing(bool on) override { return inner_->set_step_timing(on); }
  std::optional<StepTiming> last_step_timing() const override { return inner_->last_step_timing(); }
  bool set_phase_timer(PhaseTimer* timer) override { return inner_->set_phase_timer(timer); }
  std::optional<StartupTiming> startup_timing() const override { return inner_->startup_timing(); }

  // The steps recorded since the last call (EXIT commands are not steps).
  std::vector<RecordedStep> take_steps() { return std::exchange(steps_, {}); }
  const std::vector<RecordedStep>& steps() const { return steps_; }

 private:
  std::unique_ptr<StepExecutor> inner_;
  std::vector<RecordedStep> steps_;
};

}  // namespace nanovllm::bench
