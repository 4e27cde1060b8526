#include "engine/job/run_job.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <iostream>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/chat_template.h"
#include "engine/job/interrupt.h"
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

std::unique_ptr<ResultWriter> open_writer(const JobSettings& s) {
  ResultWriterOptions options;
  const std::filesystem::path model = s.model_dir.lexically_normal();
  options.served_model = (model.has_filename() ? model : model.parent_path()).filename().string();
  if (s.output) return ResultWriter::open(*s.output, /*append=*/s.resume, options);
  return std::make_unique<ResultWriter>(std::cout, options);
}

CompletionOutput completion_of(const RequestOutput& out, const Tokenizer& tokenizer) {
  CompletionOutput c;
  c.token_ids = out.completion_token_ids;
  c.text = tokenizer.decode(c.token_ids, /*skip_special_tokens=*/true);
  c.finish_reason = out.finish_reason;
  c.prompt_tokens = static_cast<int32_t>(out.prompt_token_ids.size());
  c.cached_tokens = out.num_cached_tokens;
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

// Every request of the file, validated, less those --resume finds answered.
std::vector<Request> pending_requests_of(const JobSettings& s, const Tokenizer& tokenizer) {
  std::vector<Request> requests = read_and_validate(s, tokenizer);
  if (!s.resume) return requests;
  const ResumeState state = prepare_resume(*s.output);
  const size_t before = requests.size();
  requests = pending_requests(std::move(requests), state);
  spdlog::info("--resume: {} of {} requests already answered in {}; {} to go",
               before - requests.size(), before, s.output->string(), requests.size());
  return requests;
}

// The engine loop over the valid requests; results written as they finish.
int run_engine(const JobSettings& s, StepExecutor& executor, std::vector<Request>& requests,
               const Tokenizer& tokenizer, ResultWriter& writer, Progress& progress) {
  EngineConfig engine_config = s.engine;
  engine_config.num_kvcache_blocks = executor.num_kv_blocks();  // what every rank allocated
  LLMEngine engine(engine_config, executor);
  std::unordered_map<int64_t, size_t> request_of;  // seq_id -> index into requests
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = requests[i];
    if (!r.ok()) continue;
    const AddRequestResult added = engine.add_request(r.prompt_token_ids, r.sampling_params, r.id);
    if (added.ok()) {
      request_of.emplace(*added.seq_id, i);
      continue;
    }
    r.fail(added.error, "");
    writer.write_error(r);
    progress.request_finished(false);
  }

  while (!engine.is_finished() && !interrupt_requested()) {
    for (const RequestOutput& out : engine.step()) {
      writer.write(requests[request_of.at(out.seq_id)], completion_of(out, tokenizer));
      progress.request_finished(true);
    }
    progress.set_tokens(engine.stats().num_prefill_tokens, engine.stats().num_decode_tokens);
    progress.update();
  }
  engine.stop_workers();
  progress.finish();
  if (interrupt_requested()) {  // the launcher's closing line says what was kept
    record_interrupted_job({writer.num_ok() + writer.num_failed(),
                            static_cast<int64_t>(engine.num_unfinished_requests())});
    return kExitInterrupted;
  }
  return writer.num_failed() > 0 ? kExitRequestsFailed : kExitOk;
}

}  // namespace

int run_job(const JobSettings& s, const ExecutorFactory& load_model) {
  const Tokenizer tokenizer = Tokenizer::from_file((s.model_dir / "tokenizer.json").string());
  std::vector<Request> requests = pending_requests_of(s, tokenizer);
  const std::unique_ptr<ResultWriter> writer = open_writer(s);
  ProgressOptions progress_options;
  progress_options.live = stderr_is_terminal();
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

  const std::unique_ptr<StepExecutor> executor = load_model();
  const std::string shortfall = kv_cache_shortfall(
      executor->num_kv_blocks(), s.engine.kvcache_block_size, s.engine.max_model_len);
  if (!shortfall.empty()) {
    executor->execute(StepCommand{});  // EXIT: the workers leave their loops
    throw JobConfigError(shortfall);
  }
  return run_engine(s, *executor, requests, tokenizer, *writer, progress);
}

}  // namespace nanovllm
