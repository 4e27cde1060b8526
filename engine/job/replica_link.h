// Data parallelism (launcher/replica_groups.h): several replicas, each an engine with its own
// executor, answer one prepared request list (engine/job/pending_work.h). They share it
// through the run's shared memory: a claim counter hands requests out as a replica has room
// (not split up front, so a replica that drew the long requests does not leave the others
// idle at the end), and each replica publishes its totals for the launcher's one progress
// line. Plain lock-free atomics: they work across processes in a shared mapping.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace nanovllm {

// One replica's running totals, written by its job, read by the launcher.
struct ReplicaTotals {
  enum State : int32_t { kLoading = 0, kGenerating = 1, kDone = 2 };
  std::atomic<int32_t> state;
  std::atomic<int64_t> ok_requests;      // requests whose every completion is written
  std::atomic<int64_t> failed_requests;  // engine rejections (validation errors: the launcher)
  std::atomic<int64_t> lines_written;    // result lines (a native request's n count n)
  std::atomic<int64_t> prefill_tokens;   // EngineStats' totals
  std::atomic<int64_t> decode_tokens;
  std::atomic<int64_t> output_tokens;
  // WorkLeft of the requests it holds (refreshed a few times a second).
  std::atomic<int64_t> work_prompt_tokens;
  std::atomic<int64_t> work_output_tokens;
  std::atomic<int64_t> work_longest_output;
};

// What a replica's job gets from the launcher.
struct ReplicaLink {
  int replica = 0;
  // The next unclaimed position in PendingWork::requests, shared by every replica.
  std::atomic<int64_t>* next_request = nullptr;
  ReplicaTotals* totals = nullptr;  // this replica's
  // Runs `write` while no other replica writes to the run's output (one results file).
  std::function<void(const std::function<void()>& write)> exclusive_write;
};

}  // namespace nanovllm
