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
  last_collected_ = steps_.size();
  steps_.push_back(std::move(recorded));
  return result;
}

void StepRecorder::launch(const StepCommand& cmd) {
  RecordedStep recorded;
  recorded.step = step_of(cmd);  // before the step, so its cost stays outside the timing
  recorded.prefill = cmd.kind == StepKind::kPrefill;
  const auto start = std::chrono::steady_clock::now();
  inner_->launch(cmd);
  recorded.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  in_flight_.push_back(steps_.size());
  steps_.push_back(std::move(recorded));
}

StepResult StepRecorder::collect() {
  CHECK(!in_flight_.empty());
  const auto start = std::chrono::steady_clock::now();
  StepResult result = inner_->collect();
  RecordedStep& recorded = steps_[in_flight_.front()];
  recorded.host_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  recorded.timing = inner_->last_step_timing();
  last_collected_ = in_flight_.front();
  in_flight_.pop_front();
  return result;
}

std::vector<RecordedStep> StepRecorder::take_steps() {
  CHECK_MSG(in_flight_.empty(), in_flight_.size() << " steps still in flight");
  last_collected_ = 0;
  return std::exchange(steps_, {});
}

const RecordedStep& StepRecorder::last_collected() const {
  CHECK_LT(last_collected_, steps_.size());
  return steps_[last_collected_];
}

}  // namespace nanovllm::bench
