// Communicator for the CPU backend's tensor parallelism across rank processes, through a
// region of the run's shared memory. all_reduce_sum: every rank copies its data into its own
// area, a barrier, every rank sums all areas in rank order 0..N-1 in f32 (so every rank gets
// bit-identical results; bf16/f16 rounded once at the end), a barrier before the areas are
// reused. Tensors larger than the areas go through in chunks. Protocol: ipc/README.md.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "ipc/bounded_wait.h"
#include "kernels/communicator.h"

namespace nanovllm {

// Bytes of the region for `world_size` ranks with areas of `max_elems` f32 elements each.
size_t shm_communicator_region_bytes(int world_size, size_t max_elems);
// Lays the region out (zeroed shared memory); once, by the launcher, before fork.
void shm_communicator_init(void* region, size_t bytes, int world_size, size_t max_elems);

class ShmCommunicator final : public Communicator {
 public:
  // Registers the calling process as `rank` (peers watch its pid).
  ShmCommunicator(void* region, size_t bytes, int rank, WaitPolicy policy = {});

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  // inout: contiguous CPU tensor of BF16, F16 or F32. Throws IpcError when a peer died
  // (never hangs), on timeout, or when the region was aborted.
  void all_reduce_sum(const TensorView& inout, const ExecContext& ctx) override;
  // send: contiguous CPU [rows, cols] (any dtype) on every rank, the same shape everywhere;
  // recv: root only, [world_size, rows, cols] of send's dtype.
  void gather_to_root(const TensorView& send, const TensorView& recv,
                      const ExecContext& ctx) override;

  // Each rank writes its value into its own area; a barrier; every rank takes the minimum of
  // all areas; a barrier before the areas are reused. Throws IpcError like the others.
  int64_t all_reduce_min(int64_t value, const ExecContext& ctx) override;

  // Makes every rank's current and next wait throw IpcError (a rank that fails tells the rest).
  void abort() override;

 private:
  void barrier();
  void check_peers() const;
  uint8_t* area(int r) const;
  void sum_areas_f32(size_t begin, size_t len, float* out) const;

  void* region_;
  int rank_;
  int world_size_;
  size_t area_bytes_;
  WaitPolicy policy_;
};

}  // namespace nanovllm
