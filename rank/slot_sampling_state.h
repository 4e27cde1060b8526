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
  // samples next (CPU: at once). A slot outside [0, num_slots) is a bug on rank 0: CHECK.
  void apply(std::span<const SlotSamplingParams> changed, cudaStream_t stream);

  kernels::SamplingSlotParams params() const;
  TensorView last_tokens() const { return last_tokens_.view(DType::kI32, {num_slots_}); }
  int num_slots() const { return num_slots_; }

 private:
  int num_slots_;
  Device device_;
  // One allocation, five [num_slots] arrays back to back: temperatures f32 | top_k i32 |
  // top_p f32 | min_p f32 | seeds i64 (the i64 array first, for its alignment).
  DeviceBuffer params_;
  std::vector<uint8_t> host_;  // the same layout on the host: what apply() copies
  DeviceBuffer last_tokens_;   // [num_slots] i32
};

}  // namespace nanovllm
