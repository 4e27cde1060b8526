#include "ipc/step_ring_sizing.h"

#include <algorithm>
#include <limits>

#include "ipc/step_command_serialization.h"
#include "kernels/check.h"

namespace nanovllm {

StepCommand worst_case_step_command(const StepLimits& limits) {
  CHECK_GT(limits.max_num_batched_tokens, 0);
  CHECK_GT(limits.block_size, 0);
  // The step's most tokens (ipc/step_limits.h): a decode of max_num_seqs rows may exceed the
  // budget, and max_num_seqs sequences of max_model_len may hold less than it.
  const auto b = static_cast<size_t>(limits.max_num_seqs);
  const auto t = static_cast<size_t>(max_step_tokens(limits));
  const auto width =
      static_cast<int32_t>(max_blocks_per_seq(limits.max_model_len, limits.block_size));
  StepCommand c;
  c.kind = StepKind::kPrefill;
  c.step_id = std::numeric_limits<uint64_t>::max();
  c.input_ids.assign(t, 0);
  c.positions.assign(t, 0);
  c.slot_mapping.assign(t, 0);
  c.cu_seqlens_q.assign(b + 1, 0);
  c.cu_seqlens_k.assign(b + 1, 0);
  c.context_lens.assign(b, 0);
  c.block_tables.assign(b * static_cast<size_t>(width), 0);
  c.block_table_width = width;
  c.logits_indices.assign(b, 0);
  c.prompt_logprobs_indices.assign(t, 0);  // every token of the step a prompt_logprobs row
  c.sample_slots.assign(b, 0);
  c.new_slot_params.assign(b, SlotSamplingParams{});  // their six travelling fields each
  c.sample_from_shards = true;
  return c;
}

size_t max_step_command_bytes(const StepLimits& limits) {
  return encode_step_command(worst_case_step_command(limits)).size();
}

RingConfig step_ring_config(const StepLimits& limits, uint32_t num_readers, uint32_t slot_count) {
  RingConfig ring;
  ring.num_readers = num_readers;
  ring.slot_count = slot_count;
  ring.slot_bytes = max_step_command_bytes(limits);
  ring.payload_schema = kStepCommandSchemaVersion;
  return ring;
}

}  // namespace nanovllm
