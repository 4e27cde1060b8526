// A step LLMEngine launched and has not collected yet (engine/llm_engine_step.cpp): what its
// results are postprocessed against.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/step_builder.h"

namespace nanovllm {

// A sequence that finishes before this step's results come (the step before it sampled its
// eos) leaves null entries behind: its rows are dropped.
struct InFlightStep {
  ScheduledBatch batch;
  std::vector<PositionRange> owed;  // [B] each row's prompt_logprobs positions
  std::vector<Sequence*> sampled;   // [S] the rows that sample, in the logits rows' order
  bool samples = false;             // the command has logits rows
  bool from_shards = false;         // ... drawn from the vocabulary shards
  int64_t preemptions = 0;          // sequences the schedule preempted
};

}  // namespace nanovllm
