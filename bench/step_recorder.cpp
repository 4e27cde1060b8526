#include "bench/step_recorder.h"

#include <chrono>
#include <utility>

#include "kernels/check.h"

namespace nanovllm::bench {

Step step_of(const StepCommand& cmd) {
  CHECK(cmd.kind == StepKind::kPrefill || cmd.kind == StepKind::kDecode);
  Step step;
  const int b_count = cmd.num_seqs();
  step.seqs.reserve(static_cast<size_t>(b_count));
  for (int b = 0; b < b_count; ++b) {
    if (cmd.kind == StepKind::kPrefill) {
      step.seqs.push_back(SeqStep{cmd.cu_seqlens_q[b + 1] - cmd.cu_seqlens_q[b],
                                  cmd.cu_seqlens_k[b + 1] - cmd.cu_seqlens_k[b]});
    } else {
      step.seqs.push_back(SeqStep{1, cmd.context_lens[b]});
    }
  }
  CHECK_EQ(step.num_tokens(), static_cast<int64_t>(cmd.num_tokens()));
  step.num_logits = static_cast<int64_t>(cmd.logits_indices.size());
  return step;
}

StepRecorder::StepRecorder(std::unique_ptr<StepExecutor> inner) : inner_(std::move(inner)) {
  CHECK(inner_ != nullptr);
}

StepResult StepRecorder::execute(const StepCommand& cmd) {
  if (cmd.kind == StepKind::kExit) return inner_->execute(cmd);
  RecordedStep recorded;
  recorded.step = step_of(cmd);  // before the step, so its cost stays outside the timing
  recorded.prefill = cmd.kind == StepKind::kPrefill;
  const auto start = std::chrono::steady_clock::now();
  StepResult result = inner_->execute(cmd);
  recorded.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  recorded.timing = inner_->last_step_timing();
  steps_.push_back(std::move(recorded));
  return result;
}

}  // namespace nanovllm::bench
