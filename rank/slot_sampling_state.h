// The sampling state per slot, on the runner's device (vLLM's persistent batch): the step
// command sends a slot's parameters once, when a sequence starts using it; every later step
// names only the slot. Rank 0 also keeps what the sampler writes per slot and per row: each
// slot's last sampled token (for a decode step that takes its input from the device), its token
// state (penalties), the processed logits rows and the sampled tokens' logprobs. A worker rank
// keeps only the draw parameters its shard candidates need (kernels/shard_sampler.h; the
// command brings it no more), and every rank of a --tp group the candidates' keys.
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
  // num_slots: the most sequences running at once (max_num_seqs), which also bounds the rows
  // one step samples. Every slot starts greedy, unpenalized, without bias or logprobs.
  // rank != 0: the draw parameters only. tp_size > 1: the shard candidates' key buffers too.
  SlotSamplingState(int num_slots, int64_t vocab_size, Device device, int rank = 0,
                    int tp_size = 1);

  // Copies the changed parameters into the device arrays, ordered on `stream` before whatever
  // samples next (CPU: at once); a penalized slot's token state is reset to its entries. A
  // slot outside [0, num_slots), more than kMaxMinTokensMaskedIds masked ids or
  // kMaxSlotLogitBias bias entries, or a token id outside the vocabulary is a bug on rank 0:
  // CHECK.
  void apply(std::span<const SlotSamplingParams> changed, cudaStream_t stream);

  // Every parameter (rank 0).
  kernels::SamplingSlotParams params() const;
  // temperatures, top_k, top_p, min_p and seeds alone (any rank): what sampling from shards reads.
  kernels::SamplingSlotParams draw_params() const;
  // This rank's candidate keys [rows, kShardCandidates] i64, and on rank 0 every rank's
  // [tp_size, rows, kShardCandidates] (tp_size > 1).
  TensorView shard_keys(int64_t rows) const;
  TensorView gathered_keys(int64_t rows) const;
  // Each slot's last sampled token [num_slots] i32 on rank 0; an empty view on a worker, which
  // samples nothing (a step that would read it, one with pending inputs, runs on one GPU only).
  TensorView last_tokens() const {
    return last_tokens_.nbytes() == 0 ? TensorView() : last_tokens_.view(DType::kI32, {num_slots_});
  }
  // Scratch and outputs for a batch of `rows` <= num_slots sampled rows.
  TensorView processed(int64_t rows) const;  // [rows, V] f32
  kernels::SampledLogprobs logprobs(int64_t rows) const;
  int num_slots() const { return num_slots_; }

 private:
  int num_slots_;
  int64_t vocab_;
  Device device_;
  bool rank0_;  // false: the draw parameters and the own keys only
  int tp_size_;
  // One allocation, eleven [num_slots] arrays back to back (Layout in the .cpp): seeds i64
  // first for its alignment, then the f32 / i32 parameters.
  DeviceBuffer params_;
  std::vector<uint8_t> host_;  // the same layout on the host: what apply() copies
  // [num_slots, kMaxMinTokensMaskedIds] i32, each row padded with -1. Meaningful only where
  // min_tokens_position > 0: a slot that masks nothing gets position 0 and its row is left as
  // it was on the device (apply() copies only the rows of slots that mask something).
  DeviceBuffer masked_ids_;
  std::vector<int32_t> masked_host_;  // the same on the host
  // [num_slots, kMaxSlotLogitBias] i32 / f32: a slot's first logit_bias_count entries.
  DeviceBuffer bias_ids_, bias_values_;
  DeviceBuffer token_state_;  // [num_slots, V] u16; rows of unpenalized slots unused
  // [kStagedEntries, 3] i32 (slot, id, state): token state entries on their way to the device.
  DeviceBuffer staged_entries_;
  DeviceBuffer last_tokens_;  // [num_slots] i32
  DeviceBuffer processed_;    // [num_slots, V] f32
  // The sampled rows' logprobs: [num_slots] f32 | [num_slots] i32 | [num_slots, W] i32 |
  // [num_slots, W] f32, W = kernels::kMaxLogprobs.
  DeviceBuffer logprobs_;
  // tp_size > 1: [num_slots, kShardCandidates] i64 (this rank's keys), then on rank 0
  // [tp_size, num_slots, kShardCandidates] i64 (every rank's, gathered).
  DeviceBuffer keys_;
};

}  // namespace nanovllm
