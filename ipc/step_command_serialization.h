// Boost.Serialization of StepCommand (binary archive): the free serialize() that Boost finds
// by argument-dependent lookup, and the byte-buffer encode/decode the ring carries.
// An EXIT is a StepCommand with kind EXIT (its vectors empty).
#pragma once

#include <boost/serialization/level.hpp>
#include <boost/serialization/tracking.hpp>
#include <boost/serialization/vector.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ipc/step_command.h"

namespace nanovllm {

template <class Archive>
void serialize(Archive& ar, SlotSamplingParams& p, const unsigned int /*version*/) {
  ar& p.slot& p.temperature& p.top_k& p.top_p& p.min_p& p.seed;
  ar& p.min_tokens_position& p.min_tokens_masked_ids;
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
  ar& c.logits_indices;
  ar& c.sample_slots& c.new_slot_params;
}

}  // namespace nanovllm

// SlotSamplingParams is plain data: its fields only, no per-archive class version or object
// tracking (kStepCommandSchemaVersion versions the whole command instead).
BOOST_CLASS_IMPLEMENTATION(nanovllm::SlotSamplingParams, boost::serialization::object_serializable)
BOOST_CLASS_TRACKING(nanovllm::SlotSamplingParams, boost::serialization::track_never)

namespace nanovllm {

// Serialized bytes of `command` (binary archive, no archive header: the ring's payload schema,
// kStepCommandSchemaVersion, stands in for one).
std::vector<uint8_t> encode_step_command(const StepCommand& command);
// Inverse of encode_step_command. Bytes that do not decode (truncated, not a command, an
// unknown kind) are a bug on the ring's other side: CHECK failure.
StepCommand decode_step_command(std::span<const uint8_t> bytes);

}  // namespace nanovllm
