#include "launcher/embedded_engine.h"

#include <spdlog/spdlog.h>

#include "engine/chat_template.h"
#include "engine/job/run_job.h"
#include "engine/request_reader.h"
#include "ipc/broadcast_ring.h"
#include "ipc/broadcast_step_executor.h"
#include "ipc/rendezvous.h"
#include "ipc/shm_communicator.h"
#include "ipc/step_command_serialization.h"
#include "launcher/engine_options.h"
#include "launcher/logging.h"
#include "launcher/rank_entry.h"
#include "launcher/usage_error.h"
#include "layers/model_folder_error.h"

namespace nanovllm {

namespace {

RunSettings settings_of(const EngineOptions& o) {
  try {
    return make_run_settings(o.launch);
  } catch (const UsageError& e) {
    throw EngineError("ValueError", std::string("LLM(): ") + e.what());
  } catch (const ModelFolderError& e) {
    throw EngineError("ValueError", std::string("LLM(): ") + e.what());
  }
}

EngineOptions options_of(const std::string& options_json) {
  try {
    return engine_options_from_json(nlohmann::json::parse(options_json));
  } catch (const EngineOptionError& e) {
    throw EngineError(e.type, e.what());
  } catch (const nlohmann::json::exception& e) {
    throw EngineError("TypeError", std::string("engine options are not JSON: ") + e.what());
  }
}

}  // namespace

EmbeddedEngine::EmbeddedEngine(const std::string& options_json, const std::string& library_dir)
    : options_([&] {
        EngineOptions o = options_of(options_json);
        configure_logging(o.launch.log_level, "nanovllm");
        return o;
      }()),
      s_(settings_of(options_)),
      tokenizer_(Tokenizer::from_file((s_.model_dir / "tokenizer.json").string())),
      levels_{load_generation_config(s_.model_dir), s_.job.cli_sampling} {
  const std::filesystem::path model = s_.model_dir.lexically_normal();
  result_options_.served_model =
      (model.has_filename() ? model : model.parent_path()).filename().string();
  result_options_.token_bytes = [this](int32_t id) {
    std::string bytes;
    tokenizer_.append_token_bytes(id, /*skip_special_tokens=*/false, bytes);
    return bytes;
  };
  if (s_.tp_size == 1) {
    single_ = std::make_unique<SingleRankCommunicator>();
    executor_ = load_model_runner(s_, *single_);
  } else {
    const std::filesystem::path worker =
        options_.worker_path.empty() ? std::filesystem::path(library_dir) / "nanovllm-worker"
                                     : options_.worker_path;
    workers_ = std::make_unique<WorkerGroup>(s_, worker, options_json);
    const ReplicaRegion& region = workers_->region();
    const RunSegmentLayout& layout = workers_->layout();
    publisher_ = std::make_unique<RendezvousPublisher>(region.rendezvous, layout.rendezvous_bytes);
    ring_ = std::make_unique<RingWriter>(region.ring, layout.ring_bytes, kStepCommandSchemaVersion);
    Communicator* comm = nullptr;
    if (s_.device == Device::kCuda) {
      WorkerGroup* group = workers_.get();
      nccl_ = start_nccl_rank0(
          *publisher_, s_.tp_size,
          [group] {
            if (group->any_dead()) throw EngineError("WorkerDied", *group->dead_worker());
            return false;
          },
          s_.custom_all_reduce);
      comm = &nccl_->comm();
    } else {
      shm_ = std::make_unique<ShmCommunicator>(region.comm, layout.comm_bytes, 0);
      comm = shm_.get();
    }
    // A dead worker ends rank 0's waits on the segment at once (its step then throws).
    ShmCommunicator* shm = shm_.get();
    workers_->on_death([region, shm] {
      ring_abort(region.ring);
      rendezvous_abort(region.rendezvous);
      if (shm) shm->abort();
    });
    try {
      executor_ = std::make_unique<BroadcastStepExecutor>(load_model_runner(s_, *comm, nccl_.get()),
                                                          *ring_);
    } catch (const std::exception& e) {
      check_workers();
      throw;
    }
  }
  const std::string shortfall = kv_cache_shortfall(
      executor_->num_kv_blocks(), s_.job.engine.kvcache_block_size, s_.job.engine.max_model_len);
  if (!shortfall.empty()) {
    executor_->execute(StepCommand{});  // EXIT: the workers leave their loops
    throw EngineError("ValueError", "LLM(): " + shortfall);
  }
  abort_all();  // a fresh runner
}

EmbeddedEngine::~EmbeddedEngine() {
  if (runner_ && !broken_) {
    try {
      runner_->engine().stop_workers();
    } catch (const std::exception& e) {
      spdlog::warn("stopping the workers: {}", e.what());
    }
  }
  runner_.reset();
  executor_.reset();
}

void EmbeddedEngine::check_workers() const {
  if (workers_ && workers_->any_dead())
    throw EngineError("WorkerDied", "worker " + workers_->dead_worker().value_or("?") +
                                        "; the engine is shut down");
}

int64_t EmbeddedEngine::add_requests(const nlohmann::json& list, int64_t first_index) {
  if (broken_) throw EngineError("RuntimeError", "the engine is shut down after a failure");
  if (!list.is_array()) throw EngineError("TypeError", "requests: expected a list");
  RequestValidator validator;
  validator.vocab_size = static_cast<int32_t>(s_.model.vocab_size);
  validator.max_model_len = s_.job.engine.max_model_len;
  validator.encode = [this](std::string_view text) { return tokenizer_.encode(text); };
  validator.render_chat = [](const nlohmann::json& messages, bool enable_thinking) {
    return render_chat(messages, /*add_generation_prompt=*/true, enable_thinking);
  };
  std::vector<std::unique_ptr<Request>> batch;
  for (size_t i = 0; i < list.size(); ++i) {
    nlohmann::json line = list[i];
    const std::string where = "request " + std::to_string(i);  // its place in this list
    if (!line.is_object()) throw EngineError("TypeError", where + ": expected a dict");
    line["id"] = std::to_string(first_index + static_cast<int64_t>(i));
    auto r = std::make_unique<Request>(
        parse_request_line(line.dump(), first_index + static_cast<int64_t>(i) + 1));
    validate_request(*r, validator, levels_);
    if (r->ok()) {
      if (!r->sampling_params.seed)
        r->sampling_params.seed = derive_request_seed(s_.job.seed, r->id);
      const std::string refused = runner_->engine().scheduler().rejection_reason(
          static_cast<int>(r->prompt_token_ids.size()), r->sampling_params);
      if (!refused.empty()) r->fail(refused, "");
    }
    if (!r->ok())
      throw EngineError("ValueError",
                        where + ": " + r->error->message +
                            (r->error->field.empty() ? "" : " (field '" + r->error->field + "')"));
    batch.push_back(std::move(r));
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto index = static_cast<size_t>(first_index) + i;
    Request& r = *batch[i];
    const std::string error = runner_->submit(r, index);
    if (!error.empty())
      throw EngineError("ValueError", "request " + std::to_string(i) + ": " + error);
    requests_[index] = std::move(batch[i]);
  }
  return static_cast<int64_t>(batch.size());
}

nlohmann::json EmbeddedEngine::step() {
  if (broken_) throw EngineError("RuntimeError", "the engine is shut down after a failure");
  check_workers();
  nlohmann::json out = {{"outputs", nlohmann::json::array()}};
  if (!runner_->is_finished()) {
    std::vector<RequestRunner::Finished> finished;
    try {
      finished = runner_->step();
    } catch (const std::exception& e) {
      broken_ = true;
      check_workers();
      throw EngineError("RuntimeError", std::string("engine step failed: ") + e.what());
    }
    for (const RequestRunner::Finished& f : finished) {
      if (f.refused) continue;
      const Request& r = *requests_.at(f.index);
      out["outputs"].push_back(result_json(r, f.output, result_options_, serial_++));
      if (f.completions_left == 0) requests_.erase(f.index);
    }
  }
  // This step's tokens: the engine keeps running totals.
  const EngineStats& stats = runner_->stats();
  out["unfinished"] = runner_->num_unfinished_sequences();
  out["prefill_tokens"] = stats.num_prefill_tokens - seen_prefill_;
  out["decode_tokens"] = stats.num_decode_tokens - seen_decode_;
  seen_prefill_ = stats.num_prefill_tokens;
  seen_decode_ = stats.num_decode_tokens;
  return out;
}

void EmbeddedEngine::abort_all() {
  EngineConfig config = s_.job.engine;
  config.num_kvcache_blocks = executor_->num_kv_blocks();
  runner_.reset();  // before its requests go
  requests_.clear();
  seen_prefill_ = seen_decode_ = 0;
  runner_ = std::make_unique<RequestRunner>(config, *executor_, tokenizer_);
}

nlohmann::json EmbeddedEngine::info() const {
  return {{"max_model_len", s_.job.engine.max_model_len},
          {"max_num_seqs", s_.job.engine.max_num_seqs},
          {"num_kvcache_blocks", executor_->num_kv_blocks()},
          {"block_size", s_.job.engine.kvcache_block_size},
          {"eos_token_ids", s_.model.eos_token_ids},
          {"vocab_size", s_.model.vocab_size},
          {"tensor_parallel_size", s_.tp_size},
          {"device", s_.device == Device::kCuda ? "cuda" : "cpu"},
          {"worker_pids", workers_ ? workers_->pids() : std::vector<pid_t>{}},
          {"segment", workers_ ? workers_->segment_name() : ""}};
}

}  // namespace nanovllm
