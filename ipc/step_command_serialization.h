// Boost.Serialization of StepCommand (binary archive): the free serialize() that Boost finds
// by argument-dependent lookup, and the byte-buffer encode/decode the ring carries.
// An EXIT is a StepCommand with kind EXIT (its vectors empty). Only the fields every rank
// executes travel: the ones step_command.h marks rank 0's alone decode empty, and of each new
// slot's parameters the first six.
#pragma once

#include <boost/serialization/vector.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ipc/step_command.h"

namespace nanovllm {

// A slot's parameters as the workers receive them: what a shard's candidates depend on, and no
// token state, bias or mask (a whole prompt's ids would otherwise size every ring slot).
template <class Archive>
void serialize(Archive& ar, SlotSamplingParams& p, const unsigned int /*version*/) {
  ar& p.slot& p.temperature& p.top_k& p.top_p& p.min_p& p.seed;
}

template <class Archive>
void serialize(Archive& ar, StepCommand& c, const unsigned int /*version*/) {
  auto kind = static_cast<uint8_t>(c.kind);
  ar& kind;
  c.kind = static_cast<StepKind>(kind);
  ar& c.step_id;
  ar& c.input_ids& c.positions& c.slot_mapping;
  ar& c.cu_seqlens_q& c.cu_seqlens_k& c.max_seqlen_q& c.max_seqlen_k;
  ar& c.context_lens;
  ar& c.block_tables& c.block_table_width;
  ar& c.logits_indices& c.prompt_logprobs_indices;
  ar& c.sample_slots& c.new_slot_params& c.sample_from_shards& c.eager;
}

// Serialized bytes of `command` (binary archive, no archive header: the ring's payload schema,
// kStepCommandSchemaVersion, stands in for one).
std::vector<uint8_t> encode_step_command(const StepCommand& command);
// Inverse of encode_step_command. Bytes that do not decode (truncated, not a command, an
// unknown kind) are a bug on the ring's other side: CHECK failure.
StepCommand decode_step_command(std::span<const uint8_t> bytes);

}  // namespace nanovllm
