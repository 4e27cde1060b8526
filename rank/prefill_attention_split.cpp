#include "rank/prefill_attention_split.h"

#include <algorithm>

#include "kernels/check.h"

namespace nanovllm {

PrefillAttentionSplit split_prefill_attention(const StepCommand& cmd, int block_size) {
  CHECK_GT(block_size, 0);
  CHECK_EQ(cmd.cu_seqlens_q.size(), cmd.cu_seqlens_k.size());
  CHECK_GE(cmd.cu_seqlens_q.size(), 1u);
  const size_t batch = cmd.cu_seqlens_q.size() - 1;
  PrefillAttentionSplit s;
  size_t b = 0;
  for (; b < batch && cmd.cu_seqlens_q[b + 1] - cmd.cu_seqlens_q[b] == 1; ++b) {
    s.lead_context_lens.push_back(cmd.cu_seqlens_k[b + 1] - cmd.cu_seqlens_k[b]);
    s.lead_max_context_len = std::max(s.lead_max_context_len, s.lead_context_lens.back());
  }
  s.lead_rows = static_cast<int>(b);
  for (; b < batch; ++b) {
    const int q = cmd.cu_seqlens_q[b + 1] - cmd.cu_seqlens_q[b];
    const int k = cmd.cu_seqlens_k[b + 1] - cmd.cu_seqlens_k[b];
    s.rest_max_seqlen_q = std::max(s.rest_max_seqlen_q, q);
    s.rest_max_seqlen_k = std::max(s.rest_max_seqlen_k, k);
    s.rest_kv_blocks += (k + block_size - 1) / block_size;
  }
  return s;
}

}  // namespace nanovllm
