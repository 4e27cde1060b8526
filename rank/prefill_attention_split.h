// How a prefill step over an fp8 KV cache splits its attention (AttentionMetadata::lead_rows):
// the chunked scheduler puts a mixed step's decodes first, and those one-query sequences go
// through the decode kernel, which reads an fp8 cache once per kv head at most of its
// bandwidth; the prefill kernels get the rest, whose blocks then fit the Hopper kernel's bf16
// staging far more often (a long-context decode row alone can hold more blocks than a whole
// chunk). Host-side arithmetic over the command; rank/model_runner.cpp uploads the result.
#pragma once

#include <cstdint>
#include <vector>

#include "ipc/step_command.h"

namespace nanovllm {

struct PrefillAttentionSplit {
  int lead_rows = 0;                       // leading sequences with one query each
  std::vector<int32_t> lead_context_lens;  // [lead_rows]: their k_len
  int lead_max_context_len = 0;
  // The other sequences' bounds (the whole step's when lead_rows is 0).
  int rest_max_seqlen_q = 0, rest_max_seqlen_k = 0;
  int64_t rest_kv_blocks = 0;  // Σ ceil(k_len / block_size) over them
};

// The split of a prefill command `cmd` (cu_seqlens_q / _k of B + 1 entries) for a cache of
// `block_size`-token blocks.
PrefillAttentionSplit split_prefill_attention(const StepCommand& cmd, int block_size);

}  // namespace nanovllm
