// Prefill under tensor parallelism with its all-reduces behind compute
// (Qwen3ForCausalLM::run_layers_overlapped). The step's rows are cut in pieces: while the
// compute stream projects (qkv or output), or runs the MLP of, one piece, a second stream sums
// another piece's row-parallel output over the ranks (the sum with its residual add and norm),
// the bytes moved by the copy engines (kernels/copy_engine_all_reduce.h), so no SM is taken from
// the GEMMs. A layer's last MLP piece's sum runs only under the next layer's first qkv piece, as
// attention needs every row -- or, where it pays (attention_by_piece), attention runs piece by
// piece too (each piece's queries against the keys up to its own last row, stored by then), so
// that sum hides under the next layer's first pieces as well. Why: the all-reduces of the 8B
// shape's 4,096-token prefill chunks at tp 2 are 32 MiB each and cost 10.3 % of a 32k-token
// prompt, 13 % of the prefill steps of nano-vllm's workload, and NCCL's kernels on a second
// stream never ran under the cuBLAS GEMMs (bench/results/h200x2-2026-11-27-issue31_where_tp2_
// loses.txt). With it that prompt takes 0.947x the time at tp 2 (bench/results/h200x4-2026-11-27-
// issue31_copy_engine.txt) and, the sums in two phases, 0.97x at tp 4 (..._issue31_copy_engine_
// two_phase.txt).
//
// Every rank enqueues the same sums in the same order, all on the second stream (the copy-engine
// protocol numbers its calls on one stream order); the compute stream waits for the second
// before anything reads a summed row, so the caller sees one stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/exec_context.h"
#include "layers/workspace.h"

namespace nanovllm {

class PrefillOverlap {
 public:
  // Steps with fewer rows keep one stream (pieces too small to hide anything).
  static constexpr int64_t kMinTokens = 2048;
  // At most this many pieces a step (larger steps keep one stream).
  static constexpr int kMaxPieces = 16;

  // Where a step of `tokens` rows of `hidden` bf16 values is cut, for sums of at most
  // `max_piece_bytes` (Communicator::copy_engine_sum_bytes): the pieces' first rows then
  // `tokens` ([0, a, b, ..., tokens]); as few pieces as fit, at least two, as even as multiples
  // of 16 rows allow (pieces of 8 MiB instead of 16 made the 32k prompt slower than NCCL).
  // Empty where the step keeps one stream: fewer than kMinTokens rows, no copy-engine path
  // (max_piece_bytes 0), or more than kMaxPieces pieces needed. Pure.
  static std::vector<int64_t> pieces(int64_t tokens, int64_t hidden, size_t max_piece_bytes);
  // Whether NANOVLLM_PREFILL_OVERLAP (read once) lets steps take it: unset, "on" or "auto" yes,
  // "off" no (the comparison switch).
  static bool allowed();
  // Attention piece by piece (Qwen3ForCausalLM::run_layers_overlapped) pays where a sum is
  // costly beside the GEMMs (from 4 ranks) and each piece's attention fills the GPU's waves: 32k
  // prompts on 4 H200s took 0.913-0.917x the time with it for the 8B shape at tp 4 (128 CTAs a
  // piece on 132 SMs), 0.93x for the 0.6B (256) and 0.93x for the 14B (126, the Hopper kernel's
  // padded tiles of Hq / Hkv 5), but 1.066x for the 4B (172: 1.3 waves), 1.005-1.015x for the 8B
  // at tp 2 and the same time for the 0.6B (bench/results/h200x4-2026-11-28-*.txt).
  static constexpr int kPieceAttentionFromRanks = 4;
  static constexpr double kPieceAttentionMinWaveFill = 0.9;
  // Whether a step at `ranks` ranks runs attention piece by piece under `choice`: "on" yes, "off"
  // no, "auto" from kPieceAttentionFromRanks ranks where the Hopper prefill kernel takes the
  // shape (`hopper`) and a piece's `piece_ctas` CTAs fill at least kPieceAttentionMinWaveFill of
  // the waves they take on `sms` SMs. Pure.
  static bool attention_by_piece(std::string_view choice, int ranks, bool hopper,
                                 int64_t piece_ctas, int sms);
  // The same under NANOVLLM_PREFILL_PIECE_ATTENTION (read once; unset is "auto").
  static bool attention_by_piece(int ranks, bool hopper, int64_t piece_ctas, int sms);

  PrefillOverlap();  // CUDA: the sums' stream (highest priority) and its events
  ~PrefillOverlap();
  PrefillOverlap(const PrefillOverlap&) = delete;
  PrefillOverlap& operator=(const PrefillOverlap&) = delete;

  // compute with the sums' stream (and no phase timer: profiled steps keep one stream).
  ExecContext comm_context(const ExecContext& compute) const;
  // The sums' stream waits for everything the compute stream has enqueued so far.
  void comm_waits_for_compute(const ExecContext& compute);
  // Marks piece p (< kMaxPieces) summed: after its sum was enqueued on the sums' stream.
  void mark_summed(int piece);
  // The compute stream waits for piece p's latest mark.
  void compute_waits_for(int piece, const ExecContext& compute);
  // Room for each of `pieces` pieces' cu_seqlens_q and _k over `n` entries (B + 1): [pieces, 2,
  // n] i32 (kernels/prefill_rows.h). Grows with the step's sequences; prefill steps are never
  // captured, so no graph holds it.
  TensorView piece_seqlens(int pieces, int64_t n) {
    return seqlens_.get(0, DType::kI32, {pieces, 2, n});
  }

 private:
  Workspace seqlens_{Device::kCuda};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t to_comm_ = nullptr;        // recorded on compute, waited on at once by the other
  cudaEvent_t summed_[kMaxPieces] = {};  // per piece: recorded on the sums' stream
};

}  // namespace nanovllm
