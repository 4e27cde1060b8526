// The run's one progress line under data parallelism, drawn by the launcher on its supervision
// tick from every replica's published totals (engine/job/replica_link.h): requests done,
// token rates and an ETA over the whole run, and at the end one summary. Each replica logs
// its own start-up line and summary, prefixed with its number.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/job/pending_work.h"
#include "engine/job/replica_link.h"
#include "engine/progress.h"

namespace nanovllm {

class ReplicaProgress {
 public:
  // `work`: the prepared requests, which the replicas claim in order; `failed_validation`:
  // those already answered with an error result. `max_model_len` bounds each output (ETA).
  ReplicaProgress(const PendingWork& work, int64_t failed_validation, int max_model_len,
                  ProgressOptions options);

  // Before fork: where the replicas' totals and the claim counter live.
  void attach(std::vector<const ReplicaTotals*> totals, const std::atomic<int64_t>* next_request);
  // Every tick: takes the totals, redraws or logs when due; the start-up line once the first
  // replica generates, a log line once all have loaded.
  void poll();
  void finish();  // the summary, once

  // Requests no replica claimed, and the result lines written so far (the closing line of an
  // interrupted run).
  int64_t unclaimed_requests() const;
  int64_t lines_written() const;

 private:
  int64_t claimed() const;

  Progress progress_;
  int64_t failed_validation_;
  std::vector<const ReplicaTotals*> totals_;
  const std::atomic<int64_t>* next_request_ = nullptr;
  // Suffix sums over the requests in claim order (size + 1): what the unclaimed ones hold.
  std::vector<int64_t> prompt_after_, output_after_, longest_after_;
  std::vector<int64_t> ok_after_;  // valid requests from each position on
  int64_t seen_ok_ = 0, seen_failed_ = 0, seen_output_ = 0;
  int64_t last_prefill_ = -1, last_decode_ = -1;
  bool generating_ = false, all_loaded_ = false, finished_ = false;
  double attached_at_ = 0;  // monotonic_seconds() just before fork
};

}  // namespace nanovllm
