#include "engine/job/run_job.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/job/interrupt.h"
#include "engine/job/pending_work.h"
#include "engine/job/replica_link.h"
#include "engine/job/request_feed.h"
#include "engine/job/request_runner.h"
#include "engine/job/work_left.h"
#include "engine/llm_engine.h"
#include "engine/progress.h"
#include "engine/result_writer.h"
#include "engine/resume.h"
#include "ipc/shard_sampling_rule.h"
#include "ipc/step_limits.h"
#include "kernels/check.h"

namespace nanovllm {

namespace {

// `tokenizer` must outlive the writer (the token texts of logprobs). A replica appends to the
// output the launcher opened, under its exclusive_write.
std::unique_ptr<ResultWriter> open_writer(const JobSettings& s, const Tokenizer& tokenizer,
                                          const ReplicaLink* link) {
  ResultWriterOptions options;
  const std::filesystem::path model = s.model_dir.lexically_normal();
  options.served_model = (model.has_filename() ? model : model.parent_path()).filename().string();
  options.token_bytes = [&tokenizer](int32_t id) {
    std::string bytes;
    tokenizer.append_token_bytes(id, /*skip_special_tokens=*/false, bytes);
    return bytes;
  };
  if (link) options.exclusive_write = link->exclusive_write;
  if (s.output) return ResultWriter::open(*s.output, /*append=*/s.resume || link, options);
  return std::make_unique<ResultWriter>(std::cout, options);
}

// The engine loop over the valid requests; results written as they finish: a native
// request's completions one line each, at once; an OpenAI request's in one record once all n
// are in. A request counts as finished (progress) when all its completions are written.
int run_engine(const JobSettings& s, StepExecutor& executor, const PendingWork& work,
               const Tokenizer& tokenizer, ResultWriter& writer, Progress& progress,
               const ReplicaLink* link) {
  // Generation time starts here, as nanovllm-bench's elapsed_s does: before the engine and
  // its requests, after the model load.
  progress.begin_generation();
  const std::vector<Request>& requests = work.requests;
  EngineConfig engine_config = s.engine;
  engine_config.num_kvcache_blocks = executor.num_kv_blocks();  // what every rank allocated
  RequestRunner runner(engine_config, executor, tokenizer);
  TotalsPublisher totals(link);
  totals.state(ReplicaTotals::kGenerating);
  std::vector<char> unfinished(requests.size(), 0);  // submitted, not every completion written
  std::vector<std::vector<CompletionOutput>> buffered(requests.size());  // OpenAI, until all n
  RequestFeed feed(requests.size(), link, engine_config.max_num_seqs);
  const auto submit = [&](size_t i) {
    const Request& r = requests[i];
    if (!r.ok()) return;  // its error result is written already
    const std::string error = runner.submit(r, i, work.written[i]);
    unfinished[i] = error.empty();
    if (error.empty()) return;
    Request failed = r;
    failed.fail(error, "");
    writer.write_error(failed);
    progress.request_finished(false);
    totals.request_finished(false);
  };
  const auto top_up = [&] {
    while (const std::optional<size_t> i = feed.next(runner.num_unfinished_sequences())) submit(*i);
  };

  top_up();
  while (!interrupt_requested()) {
    if (runner.is_finished()) {
      top_up();  // a replica may find more in the shared list
      if (runner.is_finished()) break;
    }
    for (RequestRunner::Finished& f : runner.step()) {
      progress.add_output_tokens(static_cast<int64_t>(f.output.token_ids.size()));
      if (f.refused) continue;
      const Request& r = requests[f.index];
      if (r.format == RequestFormat::kNative) {
        writer.write(r, f.output);
      } else {
        buffered[f.index].push_back(std::move(f.output));
        if (f.completions_left == 0) {
          writer.write(r, std::span<const CompletionOutput>(buffered[f.index]));
          buffered[f.index].clear();
        }
      }
      if (f.completions_left == 0) {
        unfinished[f.index] = 0;
        progress.request_finished(true);
        totals.request_finished(true);
      }
    }
    top_up();
    const EngineStats& stats = runner.stats();
    progress.set_tokens(stats.num_prefill_tokens, stats.num_decode_tokens);
    totals.tokens(stats, progress.output_tokens(), writer.num_ok() + writer.num_failed());
    // The ETA's input walks the running batch: only when a line is drawn (or published).
    const bool publish = totals.work_due();
    if (progress.output_due() || publish) {
      const WorkLeft left = runner.work_left();
      progress.set_work_left(left);
      if (publish) totals.work(left);
    }
    progress.update();
  }
  runner.engine().stop_workers();
  progress.finish();
  if (engine_config.shard_sampling_ranks > 1) {
    const EngineStats& stats = runner.stats();
    spdlog::info(
        "{} of {} sampling steps drew their tokens from the {} vocabulary shards; the rest "
        "gathered the logits (a row needed the whole vocabulary: logprobs, penalties, "
        "logit_bias, min_tokens, top-p or min-p without top-k, top-k above {})",
        stats.num_shard_sampled_steps, stats.num_sampling_steps, engine_config.shard_sampling_ranks,
        kShardSamplingMaxTopK);
  }
  if (engine_config.async_scheduling) {
    const EngineStats& stats = runner.stats();
    spdlog::info(
        "async scheduling: {} of {} decode steps were launched while the step before them ran "
        "(the others followed a step whose results they needed: a prompt waiting, logprobs, "
        "or an executor that takes no pending inputs)",
        stats.num_steps_ahead, stats.num_decode_steps);
  }
  totals.state(ReplicaTotals::kDone);
  if (interrupt_requested()) {  // the launcher's closing line says what was kept
    // Unfinished: not every completion written (an OpenAI request's buffered ones are lost;
    // --resume runs it again whole). A replica counts what it claimed; the launcher adds the
    // requests nobody claimed.
    const auto left = std::ranges::count(unfinished, char{1});
    record_interrupted_job({writer.num_ok() + writer.num_failed(), left});
    return kExitInterrupted;
  }
  return writer.num_failed() > 0 ? kExitRequestsFailed : kExitOk;
}

// Loads the model, checks its KV cache holds one sequence, runs the engine.
int load_and_run(const JobSettings& s, const PreparedJob& job, const ExecutorFactory& load_model,
                 ResultWriter& writer, Progress& progress, const ReplicaLink* link) {
  progress.begin_startup();
  const std::unique_ptr<StepExecutor> executor = load_model();
  progress.end_startup(executor->startup_timing());
  const std::string shortfall = kv_cache_shortfall(
      executor->num_kv_blocks(), s.engine.kvcache_block_size, s.engine.max_model_len);
  if (!shortfall.empty()) {
    executor->execute(StepCommand{});  // EXIT: the workers leave their loops
    throw JobConfigError(shortfall);
  }
  return run_engine(s, *executor, job.work, job.tokenizer, writer, progress, link);
}

}  // namespace

uint64_t derive_request_seed(uint64_t base_seed, std::string_view request_id) {
  return XXH64(request_id.data(), request_id.size(), base_seed);
}

std::string kv_cache_shortfall(int num_blocks, int block_size, int max_model_len) {
  const int64_t needed = max_blocks_per_seq(max_model_len, block_size);
  if (num_blocks >= needed) return {};
  return "the KV cache holds " + std::to_string(num_blocks) + " blocks of " +
         std::to_string(block_size) + " tokens, fewer than the " + std::to_string(needed) +
         " blocks one sequence of max_model_len " + std::to_string(max_model_len) +
         " tokens needs; lower --max-model-len, or give the cache more room "
         "(--gpu-memory-utilization, --cpu-kv-cache-space, --num-gpu-blocks-override)";
}

int run_job(const JobSettings& s, const ExecutorFactory& load_model) {
  const double run_start = monotonic_seconds();  // the summary's wall time
  const PreparedJob job = prepare_job(s);
  const std::vector<Request>& requests = job.work.requests;
  const std::unique_ptr<ResultWriter> writer = open_writer(s, job.tokenizer, nullptr);
  ProgressOptions progress_options;
  progress_options.live = stderr_is_terminal();
  progress_options.run_start = run_start;
  Progress progress(static_cast<int64_t>(requests.size()), progress_options);
  for (const Request& r : requests) {
    if (r.ok()) continue;
    writer->write_error(r);
    progress.request_finished(false);
  }
  const int64_t failed = count_failed(requests);
  if (failed > 0)
    spdlog::warn("{} of {} requests failed validation (error results written)", failed,
                 requests.size());
  if (failed == static_cast<int64_t>(requests.size())) {  // nothing to generate: no model
    if (requests.empty()) spdlog::warn("no requests to run in {}", s.prompts.string());
    progress.finish();
    return failed > 0 ? kExitRequestsFailed : kExitOk;
  }
  return load_and_run(s, job, load_model, *writer, progress, nullptr);
}

int run_replica_job(const JobSettings& s, const PreparedJob& job, const ExecutorFactory& load_model,
                    const ReplicaLink& link) {
  CHECK(link.next_request != nullptr && link.totals != nullptr);
  const std::unique_ptr<ResultWriter> writer = open_writer(s, job.tokenizer, &link);
  // Its own figures go to the log only (start-up line, summary): the launcher draws the run's
  // one progress line from every replica's totals.
  ProgressOptions progress_options;
  progress_options.log_interval_s = 1e18;
  progress_options.log = [replica = link.replica](const std::string& line) {
    spdlog::info("replica {}: {}", replica, line);
  };
  Progress progress(static_cast<int64_t>(job.work.requests.size()), progress_options);
  const int rc = load_and_run(s, job, load_model, *writer, progress, &link);
  // Validation errors are the launcher's to write and count; the exit code says them too.
  if (rc == kExitOk && count_failed(job.work.requests) > 0) return kExitRequestsFailed;
  return rc;
}

}  // namespace nanovllm
