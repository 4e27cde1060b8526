// Rank 0's sampler keeps each running sequence's sampling parameters on the device, one slot
// per sequence (vLLM's persistent batch), so a step command carries parameters only for
// sequences new to a slot. This is the engine's side of that table: which slot ids are free.
// At most max_num_seqs sequences run at once, so max_num_seqs slots always suffice.
#pragma once

#include <cstdint>
#include <set>

namespace nanovllm {

class SamplingSlots {
 public:
  // Slots 0 .. num_slots - 1, all free.
  explicit SamplingSlots(int num_slots);

  // The lowest free slot (deterministic, so a run's commands do not depend on set order).
  // None free is a bug: the scheduler never runs more than num_slots sequences.
  int32_t acquire();
  // Hands `slot` back; releasing a free or out-of-range slot is a bug (CHECK).
  void release(int32_t slot);

  int num_slots() const { return num_slots_; }
  int num_free() const { return static_cast<int>(free_.size()); }
  bool is_free(int32_t slot) const { return free_.count(slot) != 0; }

 private:
  int num_slots_;
  std::set<int32_t> free_;  // [<= num_slots] free slot ids, ascending
};

}  // namespace nanovllm
