// ModelRunner's launch and collect (async scheduling, ipc/step_executor.h): a decode step on
// the decode graphs is launched without waiting for its tokens, which are copied to the host
// behind it (rank/token_readback.h), so that rank 0's engine can launch the next decode step
// before it reads them. Every other step runs to the end at launch, as execute().
#include <optional>
#include <utility>

#include "rank/cuda_graph_runner.h"
#include "rank/model_runner.h"
#include "rank/token_readback.h"

namespace nanovllm {

bool ModelRunner::accepts_pending_inputs(int num_seqs) const {
  // The pending tokens are in rank 0's last_tokens, which only a one-GPU run's sampler writes
  // for every row (--tp > 1 merges shard candidates; the workers never see the tokens).
  return readback_ != nullptr && graphs_ != nullptr && graphs_->can_run(num_seqs) &&
         ctx_.phase_timer == nullptr;
}

void ModelRunner::launch(const StepCommand& cmd) {
  CHECK_LT(static_cast<int>(launched_.size()), kMaxStepsInFlight);
  const bool pending = cmd.has_pending_inputs();
  // Logprobs are read after the tokens, from buffers the next step overwrites: those steps end
  // at launch.
  const bool overlapped = cmd.kind == StepKind::kDecode && !cmd.eager && !cmd.sample_logprobs &&
                          cmd.prompt_logprobs_indices.empty() &&
                          accepts_pending_inputs(cmd.num_seqs());
  CHECK_MSG(overlapped || !pending,
            "a step with pending inputs this runner cannot overlap (step " << cmd.step_id << ")");
  if (!overlapped) {
    launched_.push_back(Launched{execute(cmd), -1, 0});
    return;
  }
  const int slot = readback_->begin(ctx_.stream);
  const Forward out = forward_step(cmd);
  CHECK_MSG(out.out_tokens.data != nullptr, "an overlapped decode step did not run its graph");
  readback_->end(slot, out.out_tokens, ctx_.stream);
  launched_.push_back(Launched{std::nullopt, slot, cmd.num_seqs()});
}

StepResult ModelRunner::collect() {
  CHECK(!launched_.empty());
  Launched step = std::move(launched_.front());
  launched_.pop_front();
  if (step.result) {  // ran to the end at launch (its timing, if on, is last_timing_)
    last_collected_slot_ = -1;
    return std::move(*step.result);
  }
  StepResult result;
  result.sampled_token_ids = readback_->wait(step.slot, step.rows);
  if (step_events_) {
    last_timing_ = readback_->timing(step.slot, last_collected_slot_);
    forget_previous_step_end();  // a step run to the end next measures no gap
  }
  last_collected_slot_ = step.slot;
  return result;
}

}  // namespace nanovllm
