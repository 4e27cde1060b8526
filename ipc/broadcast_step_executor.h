// Rank 0's executor under tensor parallelism: each command is encoded and written to the ring
// (every worker rank reads it and runs the same forward pass), then executed locally; the
// collectives inside the forward pass keep the ranks in step.
#pragma once

#include <memory>

#include "ipc/broadcast_ring.h"
#include "ipc/step_executor.h"

namespace nanovllm {

class BroadcastStepExecutor final : public StepExecutor {
 public:
  // `ring` is rank 0's writer and outlives this object; its slots hold any command the
  // engine limits allow and it carries kStepCommandSchemaVersion (ipc/step_ring_sizing.h).
  BroadcastStepExecutor(std::unique_ptr<StepExecutor> local, RingWriter& ring);

  StepResult execute(const StepCommand& cmd) override;
  int num_kv_blocks() const override { return local_->num_kv_blocks(); }
  // Instrumentation is rank 0's own (the workers run untimed).
  bool set_step_timing(bool on) override { return local_->set_step_timing(on); }
  std::optional<StepTiming> last_step_timing() const override { return local_->last_step_timing(); }
  // While a timer is set the commands travel marked eager, so every rank runs the same
  // (ungraphed) forward pass as rank 0's timed one (StepCommand::eager says why).
  bool set_phase_timer(PhaseTimer* timer) override;
  std::optional<StartupTiming> startup_timing() const override { return local_->startup_timing(); }

  uint64_t commands_sent() const { return commands_sent_; }

 private:
  std::unique_ptr<StepExecutor> local_;
  RingWriter& ring_;
  uint64_t commands_sent_ = 0;
  bool eager_ = false;  // a phase timer is set
};

}  // namespace nanovllm
