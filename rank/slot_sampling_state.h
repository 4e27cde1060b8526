// Rank 0's sampling state per slot, on the runner's device (vLLM's persistent batch): the step
// command sends a slot's parameters once, when a sequence starts using it; every later step
// names only the slot. Also each slot's last sampled token (the sampler writes it), for a
// decode step that takes its input from the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "ipc/step_command.h"
#include "kernels/device_buffer.h"
#include "kernels/sampler.h"

namespace nanovllm {

class SlotSamplingState {
 public:
  // num_slots: the most sequences running at once (max_num_seqs). Every slot starts greedy.
  SlotSamplingState(int num_slots, Device device);

  // Copies the changed parameters into the device arrays, ordered on `stream` before whatever
  // samples next (CPU: at once). A slot outside [0, num_slots) or more than
  // kMaxMinTokensMaskedIds masked ids is a bug on rank 0: CHECK.
  void apply(std::span<const SlotSamplingParams> changed, cudaStream_t stream);

  kernels::SamplingSlotParams params() const;
  TensorView last_tokens() const { return last_tokens_.view(DType::kI32, {num_slots_}); }
  int num_slots() const { return num_slots_; }

 private:
  int num_slots_;
  Device device_;
  // One allocation, six [num_slots] arrays back to back: seeds i64 | temperatures f32 |
  // top_k i32 | top_p f32 | min_p f32 | min_tokens_position i32 (the i64 array first, for its
  // alignment).
  DeviceBuffer params_;
  std::vector<uint8_t> host_;  // the same layout on the host: what apply() copies
  // [num_slots, kMaxMinTokensMaskedIds] i32, each row padded with -1. Meaningful only where
  // min_tokens_position > 0: a slot that masks nothing gets position 0 and its row is left as
  // it was on the device (apply() copies only the rows of slots that mask something).
  DeviceBuffer masked_ids_;
  std::vector<int32_t> masked_host_;  // the same on the host
  DeviceBuffer last_tokens_;          // [num_slots] i32
};

}  // namespace nanovllm
