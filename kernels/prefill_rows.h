// A prefill step's attention for a range of its rows only (layers/prefill_overlap.h: the step's
// rows cut in pieces, each piece's attention run as soon as its own K/V are stored, before the
// later pieces' projections). Piece [a, b) of the step's rows keeps, of sequence j with rows
// [cu_q[j], cu_q[j+1]) and k_len_j keys, the rows inside [a, b); their queries keep their
// positions, so the sequence's keys end at its last row inside the piece: k_len_j less its rows
// after b. A sequence with no row inside has q_len 0 (the kernels skip it). The rows stay
// absolute (cu_q[0] may be > 0), as the prefill kernels take them.
#pragma once

#include <cstdint>

#include "kernels/exec_context.h"
#include "kernels/tensor.h"

#if defined(__CUDACC__)
#define NANOVLLM_PREFILL_ROWS_HD __host__ __device__
#else
#define NANOVLLM_PREFILL_ROWS_HD
#endif

namespace nanovllm::kernels {

// out_q, out_k: [batch + 1] each, from cu_q, cu_k: [batch + 1] (prefix sums of the step's q and
// k lengths; cu_q absolute rows). Pure; the CUDA launcher runs it in one thread.
NANOVLLM_PREFILL_ROWS_HD inline void clip_seqlens_to_rows(const int32_t* cu_q, const int32_t* cu_k,
                                                          int batch, int32_t a, int32_t b,
                                                          int32_t* out_q, int32_t* out_k) {
  const auto clamp = [a, b](int32_t x) { return x < a ? a : x > b ? b : x; };
  out_k[0] = 0;
  for (int j = 0; j < batch; ++j) {
    const int32_t end = clamp(cu_q[j + 1]), begin = clamp(cu_q[j]);
    out_q[j] = begin;
    const int32_t k_len = cu_k[j + 1] - cu_k[j];
    // Rows of sequence j after the piece leave its keys; none inside: no keys either.
    const int32_t keys = end > begin ? k_len - (cu_q[j + 1] - end) : 0;
    out_k[j + 1] = out_k[j] + keys;
  }
  out_q[batch] = clamp(cu_q[batch]);
}

namespace cuda {
// clip_seqlens_to_rows on the device: cu_seqlens_q / _k [B + 1] i32 (CUDA) into out [2, B + 1]
// i32 (row 0 the piece's cu_seqlens_q, row 1 its cu_seqlens_k). One thread: B is at most a
// step's sequences.
void clip_seqlens_to_rows(const TensorView& cu_seqlens_q, const TensorView& cu_seqlens_k,
                          int32_t row_begin, int32_t row_end, const TensorView& out,
                          const ExecContext& ctx);
}  // namespace cuda

}  // namespace nanovllm::kernels
