// The ETA's input (Progress::set_work_left) from what the job knows of its requests: prompt
// tokens not yet prefilled, and output tokens not yet generated with each sequence's
// max_tokens as its bound. The job adds every engine request and drops every sequence that
// finishes; the rest comes from the engine (its totals and its running sequences), so
// nothing here is per step beyond a walk over the running batch.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>

#include "engine/llm_engine.h"
#include "engine/progress.h"
#include "engine/sequence.h"

namespace nanovllm {

class WorkLeftTracker {
 public:
  explicit WorkLeftTracker(int max_model_len) : max_model_len_(max_model_len) {}

  // The most one sequence may generate: max_tokens, within what max_model_len leaves.
  int64_t output_budget(int64_t prompt_tokens, int32_t max_tokens) const {
    return std::max<int64_t>(0, std::min<int64_t>(max_tokens, max_model_len_ - prompt_tokens));
  }

  // An engine request of `num_seqs` sequences; returns each one's output budget.
  int64_t add(int64_t prompt_tokens, const SamplingParams& params, int32_t num_seqs) {
    const int64_t budget = output_budget(prompt_tokens, params.max_tokens);
    prompt_tokens_ += prompt_tokens * num_seqs;
    output_budget_ += budget * num_seqs;
    return budget;
  }
  // A sequence with that budget finished: whatever it did not use is no longer work.
  void finished(int64_t budget) { output_budget_ -= budget; }

  // Recomputed prompts (after a preemption) count as prefilled work done, so the prompt
  // tokens left may read low then; a preempted sequence's generated tokens count as not yet
  // generated (high). Waiting sequences do not enter longest_output.
  WorkLeft left(const EngineStats& stats, const std::deque<Sequence*>& running) const {
    WorkLeft w;
    w.prompt_tokens =
        std::max<int64_t>(0, prompt_tokens_ - stats.num_prefill_tokens - stats.num_cached_tokens);
    int64_t generated = 0;
    for (const Sequence* seq : running) {
      const int64_t done = seq->num_completion_tokens();
      generated += done;
      w.longest_output =
          std::max(w.longest_output,
                   output_budget(seq->num_prompt_tokens, seq->sampling_params.max_tokens) - done);
    }
    w.output_tokens = std::max<int64_t>(0, output_budget_ - generated);
    return w;
  }

 private:
  int max_model_len_;
  int64_t prompt_tokens_ = 0;  // every added sequence's prompt
  int64_t output_budget_ = 0;  // the budgets of the sequences not yet finished
};

}  // namespace nanovllm
