// What ModelRunner's files share about a step's inputs (rank/model_runner.cpp runs the step,
// rank/model_runner_sampling.cpp samples and reads back): the slots of its input workspace and
// the sampled rows' positions. Included by those two files only.
#pragma once

#include <cstdint>
#include <vector>

#include "ipc/step_command.h"
#include "kernels/check.h"

namespace nanovllm::runner_inputs {

// Slots of inputs_ (one per uploaded step input).
enum InputSlot : size_t {
  kInputIds,
  kPositions,
  kSlotMapping,
  kCuQ,
  kCuK,
  kContextLens,
  kBlockTables,
  kLogitsIndices,
  kSampleSlots,
  kSamplePositions,
  kOutTokens,
  kLogits,
  // prompt_logprobs: [P] rows, targets and alternatives in; [P] logprob and rank, [P, W] top
  // ids and top logprobs out (W = kernels::kMaxLogprobs)
  kPromptRows,
  kPromptTargets,
  kPromptNumTop,
  kPromptLogprob,
  kPromptRank,
  kPromptTopIds,
  kPromptTopLogprobs
};
inline int64_t len(const auto& v) {
  return static_cast<int64_t>(v.size());
}
// Each sampled row's input position [S]: the sampler draws for the token after it.
inline std::vector<int32_t> sampled_row_positions(const StepCommand& cmd) {
  std::vector<int32_t> positions;
  positions.reserve(cmd.logits_indices.size());
  for (const int32_t row : cmd.logits_indices) {
    CHECK(row >= 0 && row < cmd.num_tokens());
    positions.push_back(cmd.positions[static_cast<size_t>(row)]);
  }
  return positions;
}

}  // namespace nanovllm::runner_inputs
