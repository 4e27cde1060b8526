// How a job's engine is fed: which request it submits next (all at once, or, as a replica
// under data parallelism, claimed from the shared list while it has room), and what a replica
// publishes of its progress for the launcher.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "engine/job/replica_link.h"
#include "engine/llm_engine.h"
#include "engine/progress.h"

namespace nanovllm {

// Which request the job submits next. One engine: all of them, at once. A replica: claimed
// one at a time from the shared counter, only while its engine holds fewer sequences than
// `room` (max_num_seqs: no more could run in a step), so requests wait in the shared list,
// where any replica with room takes them, rather than in one replica's queue.
class RequestFeed {
 public:
  RequestFeed(size_t total, const ReplicaLink* link, int room)
      : total_(static_cast<int64_t>(total)), link_(link), room_(room) {}

  std::optional<size_t> next(int unfinished_sequences) {
    if (exhausted_ || (link_ && unfinished_sequences >= room_)) return std::nullopt;
    const int64_t i = link_ ? link_->next_request->fetch_add(1) : next_++;
    if (i >= total_) {
      exhausted_ = true;
      return std::nullopt;
    }
    return static_cast<size_t>(i);
  }
  bool exhausted() const { return exhausted_; }

 private:
  int64_t total_;
  const ReplicaLink* link_;
  int room_;
  int64_t next_ = 0;
  bool exhausted_ = false;
};

// A replica's totals for the launcher (nothing without a link); the work left is walked a
// few times a second, not every step.
class TotalsPublisher {
 public:
  explicit TotalsPublisher(const ReplicaLink* link) : t_(link ? link->totals : nullptr) {}

  void state(ReplicaTotals::State s) {
    if (t_) t_->state.store(s);
  }
  void request_finished(bool ok) {
    if (t_) (ok ? t_->ok_requests : t_->failed_requests).fetch_add(1);
  }
  void tokens(const EngineStats& stats, int64_t output_tokens, int64_t lines_written) {
    if (!t_) return;
    t_->prefill_tokens.store(stats.num_prefill_tokens);
    t_->decode_tokens.store(stats.num_decode_tokens);
    t_->output_tokens.store(output_tokens);
    t_->lines_written.store(lines_written);
  }
  bool work_due() const { return t_ && monotonic_seconds() >= next_work_; }
  void work(const WorkLeft& w) {
    t_->work_prompt_tokens.store(w.prompt_tokens);
    t_->work_output_tokens.store(w.output_tokens);
    t_->work_longest_output.store(w.longest_output);
    next_work_ = monotonic_seconds() + 0.25;
  }

 private:
  ReplicaTotals* t_;
  double next_work_ = 0;
};

}  // namespace nanovllm
