// The tp > 1 StepRunner of rank 0: each step prepares the StepCommand, encodes it, writes it
// to the ring (every worker rank reads it and runs the same forward pass), then executes it
// locally; the collectives inside the forward pass keep the ranks in step.
#pragma once

#include "engine/step_runner.h"
#include "ipc/broadcast_ring.h"
#include "rank/model_runner.h"

namespace nanovllm {

class BroadcastStepRunner final : public StepRunner {
 public:
  // Both outlive this object. `ring` is rank 0's writer; slots hold any command the limits allow.
  BroadcastStepRunner(ModelRunner& runner, RingWriter& ring) : runner_(runner), ring_(ring) {}

  std::vector<int32_t> run(std::span<Sequence* const> seqs, bool is_prefill) override;

  // Tells every worker to leave its loop (a StepCommand of kind EXIT). Call once, at the end.
  void send_exit();

  uint64_t steps_sent() const { return next_step_id_; }

 private:
  void broadcast(const StepCommand& cmd);

  ModelRunner& runner_;
  RingWriter& ring_;
  uint64_t next_step_id_ = 0;
};

}  // namespace nanovllm
