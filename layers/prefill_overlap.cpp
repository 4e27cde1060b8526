#include "layers/prefill_overlap.h"

#include <algorithm>
#include <string>

#include "kernels/check.h"
#include "kernels/env_choice.h"

namespace nanovllm {

std::vector<int64_t> PrefillOverlap::pieces(int64_t tokens, int64_t hidden,
                                            size_t max_piece_bytes) {
  if (tokens < kMinTokens || hidden <= 0 || max_piece_bytes == 0) return {};
  const int64_t row_bytes = hidden * 2;
  const int64_t most_rows = static_cast<int64_t>(max_piece_bytes) / row_bytes / 16 * 16;
  if (most_rows == 0) return {};
  const int64_t n = std::max<int64_t>(2, (tokens + most_rows - 1) / most_rows);
  if (n > kMaxPieces) return {};
  // n pieces of `each` rows (a multiple of 16), the last one what is left.
  const int64_t each = std::min(most_rows, ((tokens + n - 1) / n + 15) / 16 * 16);
  if (each * (n - 1) >= tokens) return {};  // too few rows for n pieces (never at kMinTokens)
  std::vector<int64_t> cuts;
  for (int64_t p = 0; p < n; ++p) cuts.push_back(p * each);
  cuts.push_back(tokens);
  if (cuts[n] - cuts[n - 1] > most_rows) return {};
  return cuts;
}

bool PrefillOverlap::allowed() {
  static const bool on =
      kernels::env_choice("NANOVLLM_PREFILL_OVERLAP", {"on", "off", "auto"}) != "off";
  return on;
}

bool PrefillOverlap::attention_by_piece(std::string_view choice, int ranks, bool hopper,
                                        int64_t piece_ctas, int sms) {
  if (choice == "on") return true;
  if (choice == "off") return false;
  if (ranks < kPieceAttentionFromRanks || !hopper || piece_ctas <= 0 || sms <= 0) return false;
  const int64_t waves = (piece_ctas + sms - 1) / sms;
  return static_cast<double>(piece_ctas) >=
         kPieceAttentionMinWaveFill * static_cast<double>(waves * sms);
}

bool PrefillOverlap::attention_by_piece(int ranks, bool hopper, int64_t piece_ctas, int sms) {
  static const std::string choice =
      kernels::env_choice("NANOVLLM_PREFILL_PIECE_ATTENTION", {"on", "off", "auto"});
  return attention_by_piece(choice, ranks, hopper, piece_ctas, sms);
}

PrefillOverlap::PrefillOverlap() {
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // Highest priority: as the GEMMs' blocks end, the sum kernels' blocks take the SMs first.
  CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
  CUDA_CHECK(cudaEventCreateWithFlags(&to_comm_, cudaEventDisableTiming));
  for (cudaEvent_t& e : summed_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

PrefillOverlap::~PrefillOverlap() {
  // Destructors do not throw: a failure here only leaks the handles.
  for (cudaEvent_t e : summed_)
    if (e != nullptr) cudaEventDestroy(e);
  if (to_comm_ != nullptr) cudaEventDestroy(to_comm_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

ExecContext PrefillOverlap::comm_context(const ExecContext& compute) const {
  ExecContext c = compute;
  c.stream = stream_;
  c.phase_timer = nullptr;
  return c;
}

void PrefillOverlap::comm_waits_for_compute(const ExecContext& compute) {
  CUDA_CHECK(cudaEventRecord(to_comm_, compute.stream));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, to_comm_, 0));
}

void PrefillOverlap::mark_summed(int piece) {
  CHECK(piece >= 0 && piece < kMaxPieces);
  CUDA_CHECK(cudaEventRecord(summed_[piece], stream_));
}

void PrefillOverlap::compute_waits_for(int piece, const ExecContext& compute) {
  CHECK(piece >= 0 && piece < kMaxPieces);
  CUDA_CHECK(cudaStreamWaitEvent(compute.stream, summed_[piece], 0));
}

}  // namespace nanovllm
