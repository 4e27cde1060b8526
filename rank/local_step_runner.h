// The --tp 1 path: the engine and the model in one process. Each step prepares the command
// and executes it directly (no ring, no broadcast).
#pragma once

#include "engine/step_runner.h"
#include "rank/model_runner.h"

namespace nanovllm {

class LocalStepRunner final : public StepRunner {
 public:
  explicit LocalStepRunner(ModelRunner& runner) : runner_(runner) {}
  std::vector<int32_t> run(std::span<Sequence* const> seqs, bool is_prefill) override;

 private:
  ModelRunner& runner_;
  uint64_t next_step_id_ = 0;
};

}  // namespace nanovllm
