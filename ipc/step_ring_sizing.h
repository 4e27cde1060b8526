// Ring slots are fixed at start-up, so they are sized for the largest StepCommand the engine
// limits allow: measured by encoding a worst-case command, never estimated. A bigger command
// later is a bug (RingWriter::write CHECK-fails).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ipc/broadcast_ring.h"
#include "ipc/step_command.h"
#include "ipc/step_limits.h"

namespace nanovllm {

// Every serialized vector at the longest length the limits allow, the prefill and decode fields
// together: T = max_step_tokens(limits) tokens (each one a prompt_logprobs
// row), B = max_num_seqs sequences (all sampled, each new to its slot), block tables
// [B, ceil(max_model_len / block_size)]. Rank 0's own sampling fields never travel.
StepCommand worst_case_step_command(const StepLimits& limits);

// encode_step_command(worst_case_step_command(config)).size(): the binary archive's length
// depends on the vectors' lengths only, never on their values.
size_t max_step_command_bytes(const StepLimits& limits);

// The ring of a run with `num_readers` worker ranks: slots of max_step_command_bytes, payload
// schema kStepCommandSchemaVersion (its writer and readers attach with the same number).
RingConfig step_ring_config(const StepLimits& limits, uint32_t num_readers,
                            uint32_t slot_count = 4);

}  // namespace nanovllm
