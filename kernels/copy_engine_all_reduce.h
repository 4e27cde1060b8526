// The row-parallel sum of a large prefill step moved by the GPUs' copy engines instead of their
// SMs, fused with the residual add and RMSNorm after it. Why: a prefill all-reduce of the 8B
// shape at tp 2 is 32 MiB (4,096 rows of 4,096); NCCL's kernels cost 10 % of a 32k-token prompt
// and, running on SMs, could not overlap the cuBLAS GEMMs on a second stream (bench/results/
// h200x2-2026-11-27-issue31_where_tp2_loses.txt). A copy engine moves the bytes while every SM
// computes, so a caller that cuts its rows in pieces (layers/prefill_overlap.h) hides the moves;
// only a short sum + add + norm kernel runs on the SMs.
//
// One call on rank r, all of it enqueued on one stream, never waiting on the host. On 2 ranks
// (one phase):
//   1. copy x into slot r of the peer's inbox (cudaMemcpyAsync: a copy engine, over NVLink);
//   2. raise flags[p][r] to `call` on the peer p (cuStreamWriteValue32, after a memory barrier,
//      so the copied bytes are visible before the flag);
//   3. wait until flags[r][p] >= call (cuStreamWaitValue32: the stream's front end waits, no SM
//      spins);
//   4. one kernel: y = the f32 sum over the ranks in order 0..N-1 (x itself at r, inbox slot p
//      for peer p) rounded to bf16; residual = bf16(y + residual); x = rms_norm(residual) * weight.
// On more ranks (two phases, the bytes of NCCL's ring: each rank sends 2 (N - 1) / N of x where
// a copy of all of x to every peer sends N - 1 times x, which lost to NCCL on 4 H200s):
//   1. reduce-scatter: the rows are cut in N blocks (copy_engine_row_block); rank r copies its
//      block p into slot r of peer p's inbox and raises flags[p][r]; waits for flags[r][p];
//   2. a kernel sums block r over the ranks in order (as above) into the gather area, slot r of
//      its own inbox, at block r's rows;
//   3. all-gather: rank r copies that summed block to the same rows of every peer p's gather area
//      (slot p of p's inbox) and raises flags[p][N + r]; waits for flags[r][N + p];
//   4. one kernel: residual = bf16(y + residual), x = rms_norm(residual) * weight, y being the
//      gathered sums.
// The copies go out in order on the one stream: one stream a peer measured the same on 4 H200s
// (bench/results/h200x4-2026-11-27-issue31_copy_engine_two_phase.txt).
// Every rank ends with the same bits, those of kernels::peer_all_reduce_add_rms_norm (one-shot)
// on the same inputs, whatever arrives first.
//
// Calls alternate between two inbox generations (the call's parity). A peer copies into
// generation g again only in call c + 2, after its first wait of call c + 1, which needs this
// rank's first flag of c + 1, raised after this rank's last kernel of call c read generation g
// (one stream, in order). So every rank must enqueue its calls on streams ordered one after
// another, and make the same calls, numbered 1, 2, ... in the same order, with the same sizes.
// The stream waits have no time-out: a peer that dies leaves them waiting, and the launcher's
// teardown ends the group. Never inside a CUDA graph capture (the call number is the host's).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/peer_all_reduce.h"
#include "kernels/tensor.h"

namespace nanovllm::kernels {

// One rank's view of the group's copy-engine buffers: inbox[r] and flags[r] are rank r's, mapped
// into this process (CUDA IPC, or peer access within one process).
struct CopyEngineBuffers {
  int rank = 0;
  int world_size = 0;
  void* inbox[kMaxPeerRanks] = {};      // rank r's inbox [2 generations][world_size][slot_bytes]
  uint32_t* flags[kMaxPeerRanks] = {};  // rank r's flags [2][world_size]: the last call whose
                                        // part rank s copied into r's inbox is flags[r][s] (and,
                                        // the all-gather's, flags[r][world_size + s]); zeroed once
  size_t slot_bytes = 0;                // the largest x a call takes
};

// Bytes of one rank's inbox and of its flags.
inline size_t copy_engine_inbox_bytes(int world_size, size_t slot_bytes) {
  return 2 * static_cast<size_t>(world_size) * slot_bytes;
}
inline size_t copy_engine_flag_bytes(int world_size) {
  return 2 * static_cast<size_t>(world_size) * sizeof(uint32_t);
}
// Whether a group's calls take the two phases (more than 2 ranks).
inline bool copy_engine_two_phase(int world_size) {
  return world_size > 2;
}
// The rows [first, first + count) of block `block` of `rows` cut in `world_size` blocks: ceil(rows
// / world_size) rows each in order, the last ones shorter or empty.
struct RowBlock {
  int64_t first = 0;
  int64_t count = 0;
};
inline RowBlock copy_engine_row_block(int64_t rows, int world_size, int block) {
  const int64_t per = (rows + world_size - 1) / world_size;
  const int64_t first = std::min<int64_t>(rows, per * block);
  return {first, std::min<int64_t>(rows, first + per) - first};
}
// Where rank `sender`'s x of call `call` (1, 2, ...) lies in an inbox, in bytes.
inline size_t copy_engine_slot_offset(uint32_t call, int sender, int world_size,
                                      size_t slot_bytes) {
  return ((call & 1u) * static_cast<size_t>(world_size) + static_cast<size_t>(sender)) * slot_bytes;
}

// Whether the call takes x: bf16 [T, H] on the GPU with contiguous rows and no row padding,
// T * H * 2 <= slot_bytes, H a multiple of 8, 16-byte aligned data; the group 2, 4 or 8 ranks
// (peer_all_reduce_supports) with buffers.
bool copy_engine_fits(const TensorView& x, const CopyEngineBuffers& buffers);

// The call described above (call: this rank's call number, from 1). residual: [T, H] bf16, any
// row stride that is a multiple of 8; weight: [H] bf16. Throws std::invalid_argument where
// copy_engine_fits refuses x or the shapes disagree, and a CUDA error as any launcher.
void copy_engine_add_rms_norm(const TensorView& x, const TensorView& residual,
                              const TensorView& weight, float eps, const CopyEngineBuffers& buffers,
                              uint32_t call, cudaStream_t stream);

}  // namespace nanovllm::kernels
