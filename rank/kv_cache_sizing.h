// How many KV-cache blocks a rank allocates. Every rank must allocate the same count (rank 0's
// block manager hands out block ids that index every rank's cache). On the CPU backend the
// count is a pure function of the flags and the model, computed before fork; on CUDA it is
// measured by each rank's ModelRunner after loading weights and a warm-up (the ranks agree on
// the smallest), so the plan here is 0 = "size from memory" unless overridden.
#pragma once

#include <cstdint>
#include <optional>

#include "ipc/step_command.h"
#include "kernels/tensor.h"
#include "layers/model_config.h"

namespace nanovllm {

struct KvCacheSizing {
  std::optional<int> num_blocks_override;  // --num-gpu-blocks-override (any device)
  double cpu_kv_cache_space_gib = 4.0;     // --cpu-kv-cache-space (CPU backend)
  int block_size = 256;
  int tp_size = 1;
};

// CPU: floor(space / kv_block_bytes). Returns 0 when not even one block fits.
int cpu_kv_cache_blocks(double space_gib, size_t block_bytes);

// The count for this run: the override, else on the CPU floor(space / block bytes), else on
// CUDA 0 ("size from memory": rank/gpu_memory_budget.h after the warm-up). Touches no CUDA, so
// the launcher calls it before fork. Throws std::runtime_error when the CPU cache cannot hold
// a single block.
int plan_kv_cache_blocks(const KvCacheSizing& sizing, const ModelConfig& config, Device device);

// The CUDA warm-up step (ModelRunner::warm_up) that sizes every workspace slot and shows the
// peak activation memory the KV cache is sized around. It must be the costliest step the
// scheduler can send:
// - tokens = max(max_num_batched_tokens, max_num_seqs): the token budget of a step (prefill,
//   chunks, or mixed chunks and decodes), or a decode of max_num_seqs rows. Not
//   max_model_len: with chunked prefill (EngineConfig::enable_chunked_prefill) a prompt longer
//   than the budget is prefilled a budget's worth per step, so no step holds more new tokens.
// - rows = logits rows sampled: max_num_seqs (a decode, or one per sequence of a step).
// - Contexts: every sequence's cu_seqlens_k reaches max_model_len, so the last (or only)
//   sequence, when shorter than max_model_len, is a chunk after a cached prefix of
//   max_model_len - its tokens: the worst chunk (e.g. 16384 tokens at the end of a 32k
//   prompt). Activation memory does not grow with the prefix: every workspace slot
//   (layers/qwen3_model.cpp) is [tokens, width] or a fixed decode split scratch, the prefill
//   attention kernel (kernels/cuda/prefill_attention.cu) streams the paged KV through shared
//   memory tiles with no global scratch (its grid is max_seqlen_q tiles x heads x sequences),
//   and the step inputs are [tokens], [sequences + 1] and [sequences, ceil(max_model_len /
//   block)] int32. The prefix only costs time; the warm-up runs it anyway, so the kernel path
//   of a long-prefix chunk is exercised before the cache is sized.
struct WarmupShape {
  int64_t tokens = 0;  // new tokens of the step
  int64_t rows = 0;    // logits rows sampled
  int64_t max_model_len = 0;
};
WarmupShape warmup_shape(int max_num_batched_tokens, int max_num_seqs, int max_model_len);

// The warm-up prefill of `shape`: shape.tokens new tokens in sequences of max_model_len (the
// last one shorter, after a cached prefix that brings its context to max_model_len), with
// shape.rows logits rows. Nothing is stored (slot -1) and every block-table entry is 0, so a
// one-block placeholder cache serves every read (block_table_width >= ceil(max_model_len /
// block_size)). Filtered sampling on every row (the sampler's longest path), slots reused past
// num_slots.
StepCommand warmup_step_command(const WarmupShape& shape, int block_table_width, int num_slots);

}  // namespace nanovllm
