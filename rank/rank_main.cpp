#include "rank/rank_main.h"

#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/chat_template.h"
#include "engine/llm_engine.h"
#include "engine/progress.h"
#include "engine/request_reader.h"
#include "engine/result_writer.h"
#include "engine/resume.h"
#include "engine/sampling_defaults.h"
#include "engine/tokenizer.h"
#include "ipc/step_command_serialization.h"
#include "rank/broadcast_step_runner.h"
#include "rank/local_step_runner.h"
#include "rank/model_runner.h"

namespace nanovllm {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_interrupt(int) { g_interrupted = 1; }

std::unique_ptr<ModelRunner> load_runner(const RunSettings& s, Communicator& comm) {
  ModelRunnerOptions options;
  options.num_kv_blocks = s.engine.num_kvcache_blocks;
  options.gpu_memory_utilization = s.gpu_memory_utilization;
  options.enforce_eager = s.enforce_eager;
  options.max_num_batched_tokens = s.engine.max_num_batched_tokens;
  options.max_num_seqs = s.engine.max_num_seqs;
  options.max_model_len = s.engine.max_model_len;
  options.cpu_threads = s.cpu_threads;
  return std::make_unique<ModelRunner>(s.model_dir, s.model, comm.rank(), s.tp_size, comm,
                                       s.engine.kvcache_block_size, s.device, options);
}

// Reads and validates every line before any weight is loaded, so a bad file costs seconds.
std::vector<Request> read_and_validate(const RunSettings& s, const Tokenizer& tokenizer) {
  RequestValidator validator;
  // Ids the model can embed: its vocab_size (>= the tokenizer's, padded for the GPU).
  validator.vocab_size = static_cast<int32_t>(s.model.vocab_size);
  validator.max_model_len = s.engine.max_model_len;
  validator.encode = [&tokenizer](std::string_view text) { return tokenizer.encode(text); };
  validator.render_chat = [](const nlohmann::json& messages, bool enable_thinking) {
    return render_chat(messages, /*add_generation_prompt=*/true, enable_thinking);
  };
  const SamplingLevels levels{load_generation_config(s.model_dir), s.cli_sampling};
  std::vector<Request> requests = read_requests_file(s.prompts, validator, levels);
  for (Request& r : requests)
    if (r.ok() && !r.sampling_params.seed) r.sampling_params.seed = derive_request_seed(s.seed, r.id);
  return requests;
}

std::unique_ptr<ResultWriter> open_writer(const RunSettings& s) {
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
  c.finish_reason = out.finish_reason == FinishReason::STOP ? ResultFinishReason::kStop
                                                            : ResultFinishReason::kLength;
  c.prompt_tokens = static_cast<int32_t>(out.prompt_token_ids.size());
  c.cached_tokens = out.num_cached_tokens;
  return c;
}

}  // namespace

uint64_t derive_request_seed(uint64_t base_seed, std::string_view request_id) {
  return XXH64(request_id.data(), request_id.size(), base_seed);
}

void install_rank0_interrupt_handler() {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
}

void ignore_interrupts() { std::signal(SIGINT, SIG_IGN); }

int run_rank0(const RunSettings& s, Communicator& comm, RingWriter* ring) {
  CHECK_EQ(comm.rank(), 0);
  CHECK_EQ(ring != nullptr, s.tp_size > 1);
  const Tokenizer tokenizer = Tokenizer::from_file((s.model_dir / "tokenizer.json").string());
  std::vector<Request> requests = read_and_validate(s, tokenizer);
  if (s.resume) {
    const ResumeState state = prepare_resume(*s.output);
    const size_t before = requests.size();
    requests = pending_requests(std::move(requests), state);
    spdlog::info("--resume: {} of {} requests already answered in {}; {} to go",
                 before - requests.size(), before, s.output->string(), requests.size());
  }
  const std::unique_ptr<ResultWriter> writer = open_writer(s);
  ProgressOptions progress_options;
  progress_options.live = stderr_is_terminal();
  Progress progress(static_cast<int64_t>(requests.size()), progress_options);
  for (const Request& r : requests) {
    if (r.ok()) continue;
    writer->write_error(r);
    progress.request_finished(false);
  }
  if (count_failed(requests) > 0)
    spdlog::warn("{} of {} requests failed validation (error results written)",
                 count_failed(requests), requests.size());

  const std::unique_ptr<ModelRunner> runner = load_runner(s, comm);
  std::unique_ptr<BroadcastStepRunner> broadcast;
  std::unique_ptr<StepRunner> local;
  if (ring) broadcast = std::make_unique<BroadcastStepRunner>(*runner, *ring);
  else local = std::make_unique<LocalStepRunner>(*runner);
  StepRunner& step_runner = ring ? static_cast<StepRunner&>(*broadcast) : *local;

  EngineConfig engine_config = s.engine;
  engine_config.num_kvcache_blocks = runner->num_kv_blocks();  // what every rank allocated
  LLMEngine engine(engine_config, step_runner);
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
    writer->write_error(r);
    progress.request_finished(false);
  }

  int64_t prefill_seen = 0, decode_seen = 0;
  while (!engine.is_finished() && !g_interrupted) {
    for (const RequestOutput& out : engine.step()) {
      writer->write(requests[request_of.at(out.seq_id)], completion_of(out, tokenizer));
      progress.request_finished(true);
    }
    const EngineStats& stats = engine.stats();
    progress.add_prefill_tokens(stats.num_prefill_tokens - prefill_seen);
    progress.add_decode_tokens(stats.num_decode_tokens - decode_seen);
    prefill_seen = stats.num_prefill_tokens;
    decode_seen = stats.num_decode_tokens;
    progress.update();
  }
  if (broadcast) broadcast->send_exit();
  progress.finish();
  if (g_interrupted) {
    spdlog::warn("interrupted: {} finished results kept, {} requests unfinished",
                 writer->num_ok() + writer->num_failed(), engine.num_unfinished_requests());
    return kExitInterrupted;
  }
  return writer->num_failed() > 0 ? kExitRequestsFailed : kExitOk;
}

int run_worker(const RunSettings& s, Communicator& comm, RingReader& ring) {
  CHECK_GT(comm.rank(), 0);
  const std::unique_ptr<ModelRunner> runner = load_runner(s, comm);
  std::vector<uint8_t> bytes;  // one encoded StepCommand
  while (ring.read(bytes)) {
    const StepCommand cmd = decode_step_command(bytes);
    if (cmd.kind == StepKind::EXIT) return 0;
    runner->execute(cmd);
  }
  spdlog::debug("ring closed without an EXIT command");
  return 0;
}

}  // namespace nanovllm
