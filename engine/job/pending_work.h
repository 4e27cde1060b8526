// What a job has to run, fixed before any weight loads: every request of the prompts file
// (of its --shard), validated with the model's tokenizer, less those --resume finds answered.
// Under data parallelism the launcher prepares it once, before fork, so every replica holds
// the same list and --resume reads the output file before anyone writes to it.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/job/run_job.h"
#include "engine/request.h"
#include "engine/tokenizer.h"

namespace nanovllm {

// The requests to run, and for each (same positions) the completion indexes --resume found
// already written (empty without --resume).
struct PendingWork {
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> written;
};

struct PreparedJob {
  Tokenizer tokenizer;  // the model's tokenizer.json
  PendingWork work;
};

// Reads tokenizer.json and the prompts file (its shard), validates every line and applies
// --resume. Throws naming the file when one cannot be read.
PreparedJob prepare_job(const JobSettings& settings);

}  // namespace nanovllm
