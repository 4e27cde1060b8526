// Rank 0's executor as the benchmark sees it: every command goes on to the executor the
// launcher's factory returned (the model runner, or the ring broadcaster under tensor
// parallelism), and the shape of each PREFILL / DECODE step is kept as a limit-model Step
// (bench/limit_model.h) with its host time and, when the executor times steps, its CUDA-event
// timing. So a run's limit is summed over the steps the engine really ran, chunking,
// preemptions and prefix-cache hits included.
#pragma once

#include <deque>
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
  // Async scheduling: a step is recorded at its launch; its timing (and the host's wait for
  // its tokens) when it is collected.
  void launch(const StepCommand& cmd) override;
  StepResult collect() override;
  bool accepts_pending_inputs(int num_seqs) const override {
    return inner_->accepts_pending_inputs(num_seqs);
  }
  int num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  bool set_step_timing(bool on) override { return inner_->set_step_timing(on); }
  std::optional<StepTiming> last_step_timing() const override { return inner_->last_step_timing(); }
  bool set_phase_timer(PhaseTimer* timer) override { return inner_->set_phase_timer(timer); }
  std::optional<StartupTiming> startup_timing() const override { return inner_->startup_timing(); }

  // The steps recorded since the last call (EXIT commands are not steps), in launch order;
  // none may be in flight.
  std::vector<RecordedStep> take_steps();
  const std::vector<RecordedStep>& steps() const { return steps_; }
  // The step collected last (its timing known), e.g. the one LLMEngine::step just finished.
  const RecordedStep& last_collected() const;

 private:
  std::unique_ptr<StepExecutor> inner_;
  std::vector<RecordedStep> steps_;
  std::deque<size_t> in_flight_;  // indices into steps_ of the launched, uncollected steps
  size_t last_collected_ = 0;     // index into steps_
};

}  // namespace nanovllm::bench
