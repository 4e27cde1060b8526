#include "engine/job/run_job.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/chat_template.h"
#include "engine/job/interrupt.h"
#include "engine/job/work_left.h"
#include "engine/llm_engine.h"
#include "engine/progress.h"
#include "engine/request_reader.h"
#include "engine/result_writer.h"
#include "engine/resume.h"
#include "engine/sampling_defaults.h"
#include "engine/tokenizer.h"
#include "kernels/check.h"

namespace nanovllm {

namespace {

// Reads and validates every line before any weight is loaded, so a bad file costs seconds.
std::vector<Request> read_and_validate(const JobSettings& s, const Tokenizer& tokenizer) {
  RequestValidator validator;
  // Ids the model can embed: its vocab_size (>= the tokenizer's, padded for the GPU).
  validator.vocab_size = s.vocab_size;
  validator.max_model_len = s.engine.max_model_len;
  validator.encode = [&tokenizer](std::string_view text) { return tokenizer.encode(text); };
  validator.render_chat = [](const nlohmann::json& messages, bool enable_thinking) {
    return render_chat(messages, /*add_generation_prompt=*/true, enable_thinking);
  };
  const SamplingLevels levels{load_generation_config(s.model_dir), s.cli_sampling};
  std::vector<Request> requests = read_requests_file(s.prompts, validator, levels);
  std::string raised;  // lines whose temperature was raised to the minimum
  for (Request& r : requests) {
    if (r.ok() && !r.sampling_params.seed)
      r.sampling_params.seed = derive_request_seed(s.seed, r.id);
    if (r.ok() && r.temperature_raised)
      raised += (raised.empty() ? "" : ", ") + std::to_string(r.line);
  }
  if (!raised.empty())
    spdlog::warn("temperature below {} raised to {} (as vLLM does) on line(s) {}",
                 kMinSamplingTemperature, kMinSamplingTemperature, raised);
  return requests;
}

// `tokenizer` must outlive the writer (the token texts of logprobs).
std::unique_ptr<ResultWriter> open_writer(const JobSettings& s, const Tokenizer& tokenizer) {
  ResultWriterOptions options;
  const std::filesystem::path model = s.model_dir.lexically_normal();
  options.served_model = (model.has_filename() ? model : model.parent_path()).filename().string();
  options.token_bytes = [&tokenizer](int32_t id) {
    std::string bytes;
    tokenizer.append_token_bytes(id, /*skip_special_tokens=*/false, bytes);
    return bytes;
  };
  if (s.output) return ResultWriter::open(*s.output, /*append=*/s.resume, options);
  return std::make_unique<ResultWriter>(std::cout, options);
}

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

uint64_t derive_request_seed(uint64_t base_seed, std::string_view request_id) {
  return XXH64(request_id.data(), request_id.size(), base_seed);
}

std::string kv_cache_shortfall(int num_blocks, int block_size, int max_model_len) {
  const int needed = (max_model_len + block_size - 1) / block_size;
  if (num_blocks >= needed) return {};
  return "the KV cache holds " + std::to_string(num_blocks) + " blocks of " +
         std::to_string(block_size) + " tokens, fewer than the " + std::to_string(needed) +
         " blocks one sequence of max_model_len " + std::to_string(max_model_len) +
         " tokens needs; lower --max-model-len, or give the cache more room "
         "(--gpu-memory-utilization, --cpu-kv-cache-space, --num-gpu-blocks-override)";
}

namespace {

// The requests to run, and for each (same positions) the completion indexes --resume found
// already written (empty without --resume).
struct PendingWork {
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> written;
};

// Every request of the file, validated, less those --resume finds answered.
PendingWork pending_requests_of(const JobSettings& s, const Tokenizer& tokenizer) {
  PendingWork work{read_and_validate(s, tokenizer), {}};
  if (s.resume) {
    const ResumeState state = prepare_resume(*s.output);
    const size_t before = work.requests.size();
    work.requests = pending_requests(std::move(work.requests), state);
    int64_t partial = 0;
    for (const Request& r : work.requests) {
      work.written.push_back(written_completions(r, state));
      partial += work.written.back().empty() ? 0 : 1;
    }
    spdlog::info("--resume: {} of {} requests already answered in {}; {} to go",
                 before - work.requests.size(), before, s.output->string(), work.requests.size());
    if (partial > 0)
      spdlog::info(
          "--resume: {} of them have some of their n completions written; only the "
          "missing ones run",
          partial);
  }
  work.written.resize(work.requests.size());
  return work;
}

// The engine loop over the valid requests; results written as they finish: a native
// request's completions one line each, at once; an OpenAI request's in one record once all n
// are in. A request counts as finished (progress) when all its completions are written.
int run_engine(const JobSettings& s, StepExecutor& executor, PendingWork& work,
               const Tokenizer& tokenizer, ResultWriter& writer, Progress& progress) {
  // Generation time starts here, as nanovllm-bench's elapsed_s does: before the engine and
  // its requests, after the model load.
  progress.begin_generation();
  std::vector<Request>& requests = work.requests;
  EngineConfig engine_config = s.engine;
  engine_config.num_kvcache_blocks = executor.num_kv_blocks();  // what every rank allocated
  // With the tokenizer: stop strings, and the completion text in every RequestOutput.
  LLMEngine engine(engine_config, executor, &tokenizer);
  // What one engine request (add_request's id) answers: which of `requests`, and, for a
  // single completion run on its own, its index (else the engine's RequestOutput::index).
  struct Submitted {
    size_t request;
    std::optional<int32_t> index;
    int64_t output_budget;  // each of its sequences' (WorkLeftTracker)
  };
  WorkLeftTracker work_left(engine_config.max_model_len);
  std::unordered_map<int64_t, Submitted> submitted;    // RequestOutput::request_id -> ...
  std::vector<int32_t> remaining(requests.size(), 0);  // completions still to write
  std::vector<std::vector<CompletionOutput>> buffered(requests.size());  // OpenAI, until all n
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = requests[i];
    if (!r.ok()) continue;
    const int32_t n = std::max(r.sampling_params.n, 1);
    // A native request resumed with some completions written runs only the missing ones
    // (completion_runs says how; resume.h).
    std::string error;
    for (const CompletionRun& run : completion_runs(r, work.written[i])) {
      const AddRequestResult added = engine.add_request(r.prompt_token_ids, run.params, r.id);
      if (!added.ok()) {  // the prompt cannot run: the same for every completion
        error = added.error;
        break;
      }
      const int32_t num_seqs = run.index ? 1 : n;
      const int64_t budget =
          work_left.add(static_cast<int64_t>(r.prompt_token_ids.size()), run.params, num_seqs);
      submitted.emplace(*added.seq_id, Submitted{i, run.index, budget});
      remaining[i] += run.index ? 1 : n;
    }
    if (error.empty()) continue;
    // Completions already submitted finish unwritten (the request is no longer ok()).
    remaining[i] = 0;
    r.fail(error, "");
    writer.write_error(r);
    progress.request_finished(false);
  }

  while (!engine.is_finished() && !interrupt_requested()) {
    for (const RequestOutput& out : engine.step()) {
      const Submitted& from = submitted.at(out.request_id);
      work_left.finished(from.output_budget);
      progress.add_output_tokens(static_cast<int64_t>(out.completion_token_ids.size()));
      Request& r = requests[from.request];
      if (!r.ok()) continue;
      CompletionOutput c = completion_of(out, from.index.value_or(out.index), r, tokenizer);
      if (r.format == RequestFormat::kNative) {
        writer.write(r, c);
      } else {
        buffered[from.request].push_back(std::move(c));
        if (remaining[from.request] == 1) {
          writer.write(r, std::span<const CompletionOutput>(buffered[from.request]));
          buffered[from.request].clear();
        }
      }
      if (--remaining[from.request] == 0) progress.request_finished(true);
    }
    progress.set_tokens(engine.stats().num_prefill_tokens, engine.stats().num_decode_tokens);
    // The ETA's input walks the running batch: only when a line is drawn.
    if (progress.output_due())
      progress.set_work_left(work_left.left(engine.stats(), engine.scheduler().running()));
    progress.update();
  }
  engine.stop_workers();
  progress.finish();
  if (interrupt_requested()) {  // the launcher's closing line says what was kept
    // Unfinished: not every completion written (an OpenAI request's buffered ones are lost;
    // --resume runs it again whole).
    const auto unfinished = std::ranges::count_if(remaining, [](int32_t k) { return k > 0; });
    record_interrupted_job({writer.num_ok() + writer.num_failed(), unfinished});
    return kExitInterrupted;
  }
  return writer.num_failed() > 0 ? kExitRequestsFailed : kExitOk;
}

}  // namespace

int run_job(const JobSettings& s, const ExecutorFactory& load_model) {
  const double run_start = monotonic_seconds();  // the summary's wall time
  const Tokenizer tokenizer = Tokenizer::from_file((s.model_dir / "tokenizer.json").string());
  PendingWork work = pending_requests_of(s, tokenizer);
  const std::vector<Request>& requests = work.requests;
  const std::unique_ptr<ResultWriter> writer = open_writer(s, tokenizer);
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

  progress.begin_startup();
  const std::unique_ptr<StepExecutor> executor = load_model();
  progress.end_startup(executor->startup_timing());
  const std::string shortfall = kv_cache_shortfall(
      executor->num_kv_blocks(), s.engine.kvcache_block_size, s.engine.max_model_len);
  if (!shortfall.empty()) {
    executor->execute(StepCommand{});  // EXIT: the workers leave their loops
    throw JobConfigError(shortfall);
  }
  return run_engine(s, *executor, work, tokenizer, *writer, progress);
}

}  // namespace nanovllm
