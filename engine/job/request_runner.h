// Validated requests on one LLMEngine: each submitted with its n completions (or, resumed,
// only the missing ones, engine/resume.h), each finished completion handed back as a
// CompletionOutput of its request. What rank 0's JSONL job (engine/job/run_job.cpp) and the
// embedded engine of the C library (launcher/embedded_engine.h) share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/job/work_left.h"
#include "engine/llm_engine.h"
#include "engine/request.h"
#include "engine/result_writer.h"
#include "engine/tokenizer.h"

namespace nanovllm {

class RequestRunner {
 public:
  // `config.num_kvcache_blocks`: what the executor allocated. The executor and the tokenizer
  // outlive this.
  RequestRunner(const EngineConfig& config, StepExecutor& executor, const Tokenizer& tokenizer);

  // Submits `request` (ok(), and alive until its last completion is handed back) under the
  // caller's `index`; `written`: completion indexes already answered (--resume). Empty on
  // success, else why the engine refuses the prompt: none of it is reported then (completions
  // it had queued run to their end unreported).
  std::string submit(const Request& request, size_t index,
                     const std::vector<int32_t>& written = {});

  struct Finished {
    size_t index = 0;  // submit()'s
    CompletionOutput output;
    int32_t completions_left = 0;  // of its request, after this one
    bool refused = false;          // its request was refused: report nothing
  };
  // One engine step: the completions it finished.
  std::vector<Finished> step();

  bool is_finished() const { return engine_.is_finished(); }
  int num_unfinished_sequences() const { return engine_.num_unfinished_requests(); }
  // The ETA's input: walks the running batch.
  WorkLeft work_left() const {
    return work_left_.left(engine_.stats(), engine_.scheduler().running());
  }
  const EngineStats& stats() const { return engine_.stats(); }
  LLMEngine& engine() { return engine_; }

 private:
  // What one engine request (add_request's id) answers.
  struct Submitted {
    size_t index;
    const Request* request;
    std::optional<int32_t> completion;  // a single completion run on its own (resume)
    int64_t output_budget;              // each of its sequences' (WorkLeftTracker)
    int32_t sequences_left;             // not yet finished
  };

  const Tokenizer& tokenizer_;
  LLMEngine engine_;
  WorkLeftTracker work_left_;
  std::unordered_map<int64_t, Submitted> submitted_;  // RequestOutput::request_id -> ...
  std::unordered_map<size_t, int32_t> left_;          // index -> completions not yet finished
  std::unordered_set<size_t> refused_;                // indexes the engine refused
};

}  // namespace nanovllm
