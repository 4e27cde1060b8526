// The CUDA communicator under tensor parallelism: NCCL, with the all-reduces of the sizes
// where NCCL's latency dominates going through peer memory instead (kernels/peer_all_reduce.h,
// rank/peer_memory.h), inside the decode graphs like any kernel. Everything else (the logits
// gather, start-up agreements, abort, waits) is NCCL's.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/communicator.h"
#include "rank/nccl_communicator.h"
#include "rank/peer_memory.h"

namespace nanovllm {

enum class AllReducePath { kNccl, kOneShot, kTwoShot };

// Which path one bf16 all-reduce of `bytes` over `world_size` ranks takes (pure; measured in
// one graph on NVLink H100s, bench/results/h100x4-2026-11-26-issue31_peer_all_reduce.txt):
// 2 ranks: one-shot up to the staging buffer (5.9-13.3 us to NCCL's 6.7-27.5 from 8 KiB to 2
// MiB); more ranks: one-shot up to 512 KiB, NCCL to 1 MiB (about even there), two-shot to
// 4 MiB, NCCL above (its rings win at 8 MiB). NCCL wherever the peer path is off.
AllReducePath choose_all_reduce(int world_size, size_t bytes, size_t staging_bytes, bool peer_on);

class PeerCommunicator final : public Communicator {
 public:
  // `peer`: null = NCCL everywhere (no peer access, or --disable-custom-all-reduce).
  PeerCommunicator(NcclCommunicator& nccl, std::unique_ptr<PeerMemory> peer);

  int rank() const override { return nccl_.rank(); }
  int world_size() const override { return nccl_.world_size(); }
  void all_reduce_sum(const TensorView& inout, const ExecContext& ctx) override;
  // One kernel (kernels::peer_all_reduce_add_rms_norm) where x takes the one-shot path and its
  // rows allow 16-byte vectors; else the sum (either path) and then the norm.
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
  void abort() override { nccl_.abort(); }
  void synchronize(cudaStream_t stream) override { nccl_.synchronize(stream); }

  // A timing experiment (nanovllm-bench --knock-out-all-reduce): from now on the forward pass's
  // all-reduces are skipped (the fused one keeps its residual add and norm), so a decode step
  // without them is timed inside the same captured graphs. The outputs are wrong; the logits
  // gather and the start-up agreements still run.
  void knock_out_all_reduces() { knocked_out_ = true; }

 private:
  NcclCommunicator& nccl_;
  std::unique_ptr<PeerMemory> peer_;
  bool knocked_out_ = false;
};

}  // namespace nanovllm
