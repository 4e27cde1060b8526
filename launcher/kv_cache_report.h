// What the launcher says and checks about the KV cache before any weight loads: the start-up
// line (how many blocks, from which flag) and the refusals of a known block count that cannot
// work (beyond this machine's memory on the CPU backend, or beyond 32-bit slot ids).
#pragma once

#include <string>

#include "kernels/tensor.h"
#include "layers/model_config.h"
#include "rank/kv_cache_sizing.h"

namespace nanovllm {

// The start-up line about the KV cache: what was decided and from which flag, e.g.
// "KV cache: 16 blocks of 256 tokens (8.0 MiB per rank, sized for 1 sequence of up to
// max_model_len 4096 tokens; --cpu-kv-cache-space sets it)". `num_blocks`: the plan's count.
std::string kv_cache_line(const KvCacheSizing& sizing, const ModelConfig& model, Device device,
                          int num_blocks);

// Throws UsageError, naming the flags, when `num_blocks` (known before loading: the CPU
// backend or an override; <= 0 = CUDA sizes it later, nothing to check) needs more memory than
// this machine has on the CPU backend (every rank's cache plus rank 0's sampling state of
// max_num_seqs x vocabulary x 6 bytes), or more token slots than an int32 slot id reaches.
void check_kv_cache_fits(const KvCacheSizing& sizing, const ModelConfig& model, Device device,
                         int num_blocks, int max_num_seqs);

}  // namespace nanovllm
