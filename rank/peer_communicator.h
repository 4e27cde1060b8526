// The CUDA communicator under tensor parallelism: NCCL, with the all-reduces of the sizes
// where NCCL's latency dominates going through peer memory instead (kernels/peer_all_reduce.h,
// rank/peer_memory.h), inside the decode graphs like any kernel. Everything else (the logits
// gather, start-up agreements, abort, waits) is NCCL's.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/communicator.h"
#include "kernels/peer_all_reduce.h"
#include "rank/nccl_communicator.h"
#include "rank/peer_memory.h"

namespace nanovllm {

enum class AllReducePath { kNccl, kOneShot, kTwoShot };

// Which path one bf16 all-reduce of `bytes` over `world_size` ranks takes (pure; measured in
// one graph on 4 NVLink H200s, all_reduce_bench --sweep-shapes with the shapes of
// peer_launch_shape, bench/results/h200x4-2026-11-26-issue31_all_reduce_shapes.txt): 2 ranks:
// one-shot up to the staging buffer (4.8-11.7 us to NCCL's 6.5-26.6 from 8 KiB to 2 MiB); more
// ranks: one-shot up to 512 KiB, two-shot to 4 MiB (15.2 us at 1 MiB to NCCL's 17.8, 33.9 at
// 4 MiB to 39.7), NCCL above (its rings win at 8 MiB). NCCL wherever the peer path is off.
AllReducePath choose_all_reduce(int world_size, size_t bytes, size_t staging_bytes, bool peer_on);

// Whether a one-shot message goes as a push instead (kernels/peer_all_reduce.h; pure), within
// the inbox: on 2 ranks up to 512 KiB, on 4 up to 64 KiB; 8 ranks keep the one-shot (not
// measured). On 2 H200s, alone in a graph, the push took 0.63-0.84x the one-shot's time from
// 8 KiB to 2 MiB, but inside the 8B shape's decode step its 2 MiB calls made the step 0.7 %
// slower (twice), while the 0.6B shape's 512 KiB calls made it 1 % faster and 8B batch 1
// (8 KiB) 3.4 % faster. On 4 H200s the fused push (kernels::peer_all_reduce_add_rms_norm) took
// 0.80-0.90x the fused one-shot's time up to 64 KiB and 1.2x at 256 KiB (bench/results/
// h200x2-2026-11-27-issue31_push_all_reduce.txt). push_on: the peer path has inboxes and
// NANOVLLM_PEER_PUSH is not "off" (the comparison switch, which turns off both pushes).
bool takes_push(int world_size, size_t bytes, size_t inbox_bytes, bool push_on);

// Whether a two-shot message goes as a push two-shot instead (kernels/peer_all_reduce.h; pure),
// its parts within an inbox slot: on 4 ranks; 8 ranks keep the two-shot (not measured). On 4
// H200s, alone in a graph, it took 0.68-0.84x the two-shot's time from 1 to 4 MiB (16.6 us at
// 2 MiB to 21.4); inside the 8B shape's decode step at batch 256 (2 MiB calls) the step took
// 0.971x (bench/results/h200x4-2026-11-27-issue31_push_two_shot.txt). On 2 ranks it moves the
// push's bytes and never beat the push.
bool takes_push_two_shot(int world_size, size_t bytes, size_t inbox_bytes, bool push_on);

// Whether a pushed all-reduce + residual add + RMSNorm is one kernel (pure): up to 256 KiB. The
// fused kernel gives each row to one block; from 512 KiB the push over every unit followed by
// the norm kernel was faster (same measurement: 6.66 against 7.18 us at 64 rows of 4096).
bool push_fuses_norm(size_t bytes);

// The peer kernels' launch shape for a group (pure; the same sweep): 512 threads a block on 2
// ranks, 256 on more, where 512 was 0.8-0.9x as fast from 8 KiB to 2 MiB.
kernels::PeerAllReduceShape peer_launch_shape(int world_size);

class PeerCommunicator final : public Communicator {
 public:
  // `peer`: null = NCCL everywhere (no peer access, or --disable-custom-all-reduce). Reads
  // NANOVLLM_PEER_PUSH ("off": no push of either kind; anything else or unset: takes_push and
  // takes_push_two_shot decide).
  PeerCommunicator(NcclCommunicator& nccl, std::unique_ptr<PeerMemory> peer);

  int rank() const override { return nccl_.rank(); }
  int world_size() const override { return nccl_.world_size(); }
  void all_reduce_sum(const TensorView& inout, const ExecContext& ctx) override;
  // One kernel (kernels::peer_all_reduce_add_rms_norm, one-shot, or push up to
  // push_fuses_norm) where x takes the one-shot path and its rows allow 16-byte vectors; else
  // all_reduce_sum (whichever path) and then the norm (kernels/peer_all_reduce.h says why there
  // is no fused two-shot).
  void all_reduce_add_rms_norm(const TensorView& x, const TensorView& residual,
                               const TensorView& weight, float eps,
                               const ExecContext& ctx) override;
  void gather_to_root(const TensorView& send, const TensorView& recv,
                      const ExecContext& ctx) override {
    nccl_.gather_to_root(send, recv, ctx);
  }
  int64_t all_reduce_min(int64_t value, const ExecContext& ctx) override {
    return nccl_.all_reduce_min(value, ctx);
  }
  // Below the NCCL crossover (choose_all_reduce), every size is one of our kernels.
  bool all_reduce_in_kernels(size_t bytes) const override;
  // PeerMemory::copy_engine_slot_bytes with the peer path on, else 0 (layers/prefill_overlap.h
  // has the comparison switch).
  size_t copy_engine_sum_bytes() const override;
  // kernels::copy_engine_add_rms_norm where x fits a slot (copy_engine_fits) and the stream is
  // not capturing a graph, whatever its size (the caller asked for a sum that leaves the SMs to
  // compute: the peer kernels spin on SMs); else all_reduce_add_rms_norm.
  void copy_engine_add_rms_norm(const TensorView& x, const TensorView& residual,
                                const TensorView& weight, float eps,
                                const ExecContext& ctx) override;
  void abort() override { nccl_.abort(); }
  void synchronize(cudaStream_t stream) override { nccl_.synchronize(stream); }

  // A timing experiment (nanovllm-bench --knock-out-all-reduce): from now on the forward pass's
  // all-reduces are skipped (the fused one keeps its residual add and norm), so a decode step
  // without them is timed inside the same captured graphs. The outputs are wrong; the logits
  // gather and the start-up agreements still run.
  void knock_out_all_reduces() { knocked_out_ = true; }

 private:
  NcclCommunicator& nccl_;
  // The one-shot algorithm for a message of `bytes` (kOneShot or kPush; a push needs 16-byte
  // `vectors`).
  kernels::PeerAllReduceAlgo one_shot_algo(size_t bytes, bool vectors) const;

  // Whether copy_engine_add_rms_norm sends x through the copy engines (see there).
  bool takes_copy_engine(const TensorView& x, cudaStream_t stream) const;

  std::unique_ptr<PeerMemory> peer_;
  bool push_on_ = false;
  bool copy_engine_on_ = false;
  uint32_t copy_engine_calls_ = 0;  // the last copy-engine call's number (the same on every rank)
  bool knocked_out_ = false;
};

}  // namespace nanovllm
