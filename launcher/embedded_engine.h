// The engine inside a host process (the C library's nv_engine, launcher/c_api.h): rank 0's
// model runner in this process and, under tensor parallelism, the workers of a WorkerGroup;
// requests queued as native request objects, validated with the prompts file's rules, run by
// the RequestRunner one step per call; finished completions come back as native result
// lines. Errors are EngineError with the host's exception type.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "engine/job/request_runner.h"
#include "engine/result_writer.h"
#include "engine/sampling_defaults.h"
#include "engine/tokenizer.h"
#include "launcher/engine_options.h"
#include "launcher/nccl_group.h"
#include "launcher/run_settings.h"
#include "launcher/worker_group.h"

namespace nanovllm {

class ShmCommunicator;
class RingWriter;
class RendezvousPublisher;

// type: "TypeError", "ValueError", "RuntimeError" or "WorkerDied".
struct EngineError : std::runtime_error {
  EngineError(std::string type, const std::string& message)
      : std::runtime_error(message), type(std::move(type)) {}
  std::string type;
};

class EmbeddedEngine {
 public:
  // `options_json`: c_api.h's keywords. `library_dir`: where nanovllm-worker is looked for
  // when no "worker_path" is given.
  EmbeddedEngine(const std::string& options_json, const std::string& library_dir);
  ~EmbeddedEngine();  // EXIT to the workers (unless one died), then the group's teardown
  EmbeddedEngine(const EmbeddedEngine&) = delete;
  EmbeddedEngine& operator=(const EmbeddedEngine&) = delete;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  // All or nothing; element i gets the id str(first_index + i). Returns how many.
  int64_t add_requests(const nlohmann::json& requests, int64_t first_index);
  // {"outputs": [native result lines], "unfinished", "prefill_tokens", "decode_tokens"}
  nlohmann::json step();
  void abort_all();
  nlohmann::json info() const;

 private:
  void check_workers() const;  // throws WorkerDied once one is gone

  EngineOptions options_;  // the keywords, parsed once (the workers parse the same JSON)
  RunSettings s_;
  Tokenizer tokenizer_;
  SamplingLevels levels_;
  ResultWriterOptions result_options_;
  uint64_t serial_ = 0;
  int64_t seen_prefill_ = 0, seen_decode_ = 0;  // the runner's totals at the last step
  // Destroyed in reverse: the runner, the executor (the model runner uses the communicator),
  // the communicators, the ring end and the rendezvous, the workers last.
  std::unique_ptr<WorkerGroup> workers_;
  std::unique_ptr<RendezvousPublisher> publisher_;
  std::unique_ptr<RingWriter> ring_;
  std::unique_ptr<ShmCommunicator> shm_;
  std::unique_ptr<NcclRank> nccl_;
  std::unique_ptr<Communicator> single_;
  std::unique_ptr<StepExecutor> executor_;
  std::unique_ptr<RequestRunner> runner_;
  std::unordered_map<size_t, std::unique_ptr<Request>> requests_;  // queued or running
  bool broken_ = false;  // a worker died or a step failed: only teardown is left
};

}  // namespace nanovllm
