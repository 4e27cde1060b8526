#include "launcher/replica_progress.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/job/work_left.h"

namespace nanovllm {

ReplicaProgress::ReplicaProgress(const PendingWork& work, int64_t failed_validation,
                                 int max_model_len, ProgressOptions options)
    : progress_(static_cast<int64_t>(work.requests.size()), std::move(options)),
      failed_validation_(failed_validation) {
  for (int64_t i = 0; i < failed_validation; ++i) progress_.request_finished(false);
  const size_t n = work.requests.size();
  prompt_after_.assign(n + 1, 0);
  output_after_.assign(n + 1, 0);
  longest_after_.assign(n + 1, 0);
  ok_after_.assign(n + 1, 0);
  const WorkLeftTracker budget(max_model_len);
  for (size_t i = n; i-- > 0;) {
    const Request& r = work.requests[i];
    int64_t prompt = 0, output = 0, longest = 0;
    if (r.ok()) {
      const int64_t seqs = std::max(r.sampling_params.n, 1);
      const auto tokens = static_cast<int64_t>(r.prompt_token_ids.size());
      longest = budget.output_budget(tokens, r.sampling_params.max_tokens);
      prompt = tokens * seqs;
      output = longest * seqs;
    }
    prompt_after_[i] = prompt_after_[i + 1] + prompt;
    output_after_[i] = output_after_[i + 1] + output;
    longest_after_[i] = std::max(longest_after_[i + 1], longest);
    ok_after_[i] = ok_after_[i + 1] + (r.ok() ? 1 : 0);
  }
}

void ReplicaProgress::attach(std::vector<const ReplicaTotals*> totals,
                             const std::atomic<int64_t>* next_request) {
  totals_ = std::move(totals);
  next_request_ = next_request;
  progress_.begin_startup();
  attached_at_ = monotonic_seconds();
}

int64_t ReplicaProgress::claimed() const {
  const auto total = static_cast<int64_t>(prompt_after_.size()) - 1;
  return next_request_ ? std::min(next_request_->load(), total) : 0;
}

int64_t ReplicaProgress::unclaimed_requests() const {
  return ok_after_[static_cast<size_t>(claimed())];
}

int64_t ReplicaProgress::lines_written() const {
  int64_t lines = failed_validation_;
  for (const ReplicaTotals* t : totals_) lines += t->lines_written.load();
  return lines;
}

void ReplicaProgress::poll() {
  int64_t ok = 0, failed = 0, prefill = 0, decode = 0, output = 0;
  int loaded = 0;
  WorkLeft left;
  for (const ReplicaTotals* t : totals_) {
    ok += t->ok_requests.load();
    failed += t->failed_requests.load();
    prefill += t->prefill_tokens.load();
    decode += t->decode_tokens.load();
    output += t->output_tokens.load();
    left.prompt_tokens += t->work_prompt_tokens.load();
    left.output_tokens += t->work_output_tokens.load();
    left.longest_output = std::max(left.longest_output, t->work_longest_output.load());
    loaded += t->state.load() != ReplicaTotals::kLoading ? 1 : 0;
  }
  if (!generating_ && loaded > 0) {  // generation time starts with the first replica's
    generating_ = true;
    progress_.end_startup(std::nullopt);
    progress_.begin_generation();
  }
  if (!all_loaded_ && loaded == static_cast<int>(totals_.size())) {
    all_loaded_ = true;
    spdlog::info("all {} replicas loaded {:.1f} s after fork", totals_.size(),
                 monotonic_seconds() - attached_at_);
  }
  for (; seen_ok_ < ok; ++seen_ok_) progress_.request_finished(true);
  for (; seen_failed_ < failed; ++seen_failed_) progress_.request_finished(false);
  progress_.add_output_tokens(output - seen_output_);
  seen_output_ = output;
  if (prefill == last_prefill_ && decode == last_decode_) return;  // no step since the last look
  last_prefill_ = prefill;
  last_decode_ = decode;
  const auto next = static_cast<size_t>(claimed());
  left.prompt_tokens += prompt_after_[next];
  left.output_tokens += output_after_[next];
  left.longest_output = std::max(left.longest_output, longest_after_[next]);
  progress_.set_tokens(prefill, decode);
  progress_.set_work_left(left);
  progress_.update();  // the replicas' steps since the last look count as one
}

void ReplicaProgress::finish() {
  if (finished_) return;
  finished_ = true;
  poll();
  progress_.finish();
}

}  // namespace nanovllm
