#include "launcher/data_parallel_job.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include "engine/job/pending_work.h"
#include "engine/job/replica_link.h"
#include "engine/progress.h"
#include "engine/result_writer.h"
#include "launcher/rank_processes.h"
#include "launcher/replica_progress.h"

namespace nanovllm {

namespace {

class DataParallelJob : public ReplicaGroupsJob {
 public:
  DataParallelJob(const RunSettings& s, const PreparedJob& job, int replicas,
                  int64_t failed_validation, double run_start)
      : s_(s),
        job_(job),
        replicas_(replicas),
        progress_(job.work, failed_validation, s.job.engine.max_model_len, [&] {
          ProgressOptions o;
          o.live = stderr_is_terminal();
          o.run_start = run_start;
          return o;
        }()) {}

  int replicas() const override { return replicas_; }

  void attach(const RunSegment& segment) override {
    segment_ = segment;
    std::vector<const ReplicaTotals*> totals;
    for (const ReplicaRegion& region : segment.replicas) totals.push_back(region.totals);
    progress_.attach(std::move(totals), segment.next_request);
  }

  int rank0_main(int replica, const ExecutorFactory& load_model) override {
    ReplicaLink link;
    link.replica = replica;
    link.next_request = segment_.next_request;
    link.totals = segment_.replicas[static_cast<size_t>(replica)].totals;
    link.exclusive_write = [mutex = segment_.output_mutex](const std::function<void()>& write) {
      const ProcessLock lock(*mutex);
      write();
    };
    return run_replica_job(s_.job, job_, load_model, link);
  }

  void on_tick() override { progress_.poll(); }

  std::optional<InterruptedJob> kept_results() const override {
    // Unfinished: every valid request not answered, claimed by a replica or not.
    int64_t answered = 0;
    for (const ReplicaRegion& region : segment_.replicas)
      answered += region.totals->ok_requests.load() + region.totals->failed_requests.load();
    int64_t valid = 0;
    for (const Request& r : job_.work.requests) valid += r.ok() ? 1 : 0;
    return InterruptedJob{progress_.lines_written(), std::max<int64_t>(0, valid - answered)};
  }

  void on_end() override { progress_.finish(); }

 private:
  const RunSettings& s_;
  const PreparedJob& job_;
  int replicas_;
  ReplicaProgress progress_;
  RunSegment segment_;
};

// The launcher's share of the writing: truncates the output (unless --resume) and answers
// the lines that failed validation. Returns how many did.
int64_t write_validation_errors(const JobSettings& s, const PreparedJob& job) {
  ResultWriterOptions options;
  const std::filesystem::path model = s.model_dir.lexically_normal();
  options.served_model = (model.has_filename() ? model : model.parent_path()).filename().string();
  std::unique_ptr<ResultWriter> writer =
      s.output ? ResultWriter::open(*s.output, /*append=*/s.resume, options)
               : std::make_unique<ResultWriter>(std::cout, options);
  for (const Request& r : job.work.requests)
    if (!r.ok()) writer->write_error(r);
  return writer->num_failed();
}

}  // namespace

int run_data_parallel(const RunSettings& s, spdlog::level::level_enum log_level,
                      const StallPolicy& stall) {
  const double run_start = monotonic_seconds();
  const PreparedJob job = prepare_job(s.job);  // before fork: every replica inherits it
  const int64_t failed = write_validation_errors(s.job, job);
  const auto total = static_cast<int64_t>(job.work.requests.size());
  if (failed > 0)
    spdlog::warn("{} of {} requests failed validation (error results written)", failed, total);
  if (failed == total) {  // nothing to generate: no model
    if (total == 0) spdlog::warn("no requests to run in {}", s.job.prompts.string());
    return failed > 0 ? kExitRequestsFailed : kExitOk;
  }
  // A replica with no request to take would load its model for nothing.
  const int replicas = static_cast<int>(std::min<int64_t>(s.replicas, total - failed));
  if (replicas < s.replicas)
    spdlog::info("{} replicas instead of {}: only {} requests to run", replicas, s.replicas,
                 total - failed);
  spdlog::info("data parallelism: {} replicas of {} rank(s) each share {} requests", replicas,
               s.tp_size, total - failed);
  DataParallelJob dp(s, job, replicas, failed, run_start);
  return run_replica_groups(s, log_level, dp, stall);
}

}  // namespace nanovllm
