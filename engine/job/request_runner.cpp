#include "engine/job/request_runner.h"

#include <algorithm>
#include <utility>

#include "engine/resume.h"

namespace nanovllm {

namespace {

// Completion `index` of `r` as the engine gave it. The engine's text (detokenized with the
// request's settings, cut at a stop string) when it has one, else decoded here.
CompletionOutput completion_of(const RequestOutput& out, int32_t index, const Request& r,
                               const Tokenizer& tokenizer) {
  CompletionOutput c;
  c.index = index;
  c.token_ids = out.completion_token_ids;
  c.text =
      out.text ? *out.text : tokenizer.decode(c.token_ids, r.sampling_params.skip_special_tokens);
  c.finish_reason = out.finish_reason;
  c.stop_string = out.stop_string;
  c.stop_token_id = out.stop_token_id;
  c.prompt_tokens = static_cast<int32_t>(out.prompt_token_ids.size());
  c.cached_tokens = out.num_cached_tokens;
  c.logprobs = out.logprobs;
  c.cumulative_logprob = out.cumulative_logprob;
  c.prompt_logprobs = out.prompt_logprobs;
  return c;
}

}  // namespace

RequestRunner::RequestRunner(const EngineConfig& config, StepExecutor& executor,
                             const Tokenizer& tokenizer)
    : tokenizer_(tokenizer),
      // With the tokenizer: stop strings, and the completion text in every RequestOutput.
      engine_(config, executor, &tokenizer),
      work_left_(config.max_model_len) {}

std::string RequestRunner::submit(const Request& r, size_t index,
                                  const std::vector<int32_t>& written) {
  const int32_t n = std::max(r.sampling_params.n, 1);
  for (const CompletionRun& run : completion_runs(r, written)) {
    const AddRequestResult added = engine_.add_request(r.prompt_token_ids, run.params, r.id);
    if (!added.ok()) {  // the prompt cannot run: the same for every completion
      refused_.insert(index);
      left_.erase(index);
      return added.error;
    }
    const int32_t num_seqs = run.index ? 1 : n;
    const int64_t budget =
        work_left_.add(static_cast<int64_t>(r.prompt_token_ids.size()), run.params, num_seqs);
    submitted_.emplace(*added.seq_id, Submitted{index, &r, run.index, budget, num_seqs});
    left_[index] += num_seqs;
  }
  return {};
}

std::vector<RequestRunner::Finished> RequestRunner::step() {
  std::vector<Finished> done;
  for (const RequestOutput& out : engine_.step()) {
    const Submitted& from = submitted_.at(out.request_id);
    work_left_.finished(from.output_budget);
    Finished f;
    f.index = from.index;
    f.refused = refused_.count(from.index) > 0;
    f.output = completion_of(out, from.completion.value_or(out.index), *from.request, tokenizer_);
    if (!f.refused) {
      const auto it = left_.find(from.index);
      f.completions_left = --it->second;
      if (f.completions_left == 0) left_.erase(it);
    }
    done.push_back(std::move(f));
    const auto it = submitted_.find(out.request_id);
    if (--it->second.sequences_left == 0) submitted_.erase(it);  // every sequence it ran is back
  }
  return done;
}

}  // namespace nanovllm
