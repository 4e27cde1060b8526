// How many KV-cache blocks a rank allocates. Every rank must allocate the same count (rank 0's
// block manager hands out block ids that index every rank's cache). On the CPU backend the
// count is a pure function of the flags, the model and the sequences the request file asks
// for, computed before fork; on CUDA it is measured by each rank's ModelRunner after loading
// weights and a warm-up (the ranks agree on the smallest), so the plan here is 0 = "size from
// memory" unless overridden.
#pragma once

#include <cstdint>
#include <optional>

#include "ipc/step_command.h"
#include "kernels/tensor.h"
#include "layers/model_config.h"

namespace nanovllm {

struct KvCacheSizing {
  std::optional<int> num_blocks_override;        // --num-gpu-blocks-override (any device)
  std::optional<double> cpu_kv_cache_space_gib;  // --cpu-kv-cache-space (CPU): exactly this
  int block_size = 256;
  int tp_size = 1;
  // CPU without --cpu-kv-cache-space: room for `sequences` sequences of max_model_len tokens
  // at once (the launcher passes max_num_seqs, lowered to the completions the request file
  // asks for), at most kDefaultCpuKvCacheMaxGib per rank, and never less than one sequence.
  int sequences = 1;
  int max_model_len = 4096;
  DType kv_dtype = DType::kBf16;  // --kv-cache-dtype: fp8 halves a block's bytes
};

// The most the CPU cache takes per rank unless --cpu-kv-cache-space says otherwise (the old
// fixed default, vLLM's VLLM_CPU_KVCACHE_SPACE default).
inline constexpr double kDefaultCpuKvCacheMaxGib = 4.0;

// CPU: floor(space / kv_block_bytes). Returns 0 when not even one block fits.
int cpu_kv_cache_blocks(double space_gib, size_t block_bytes);

// The count for this run: the override; else on CUDA 0 ("size from memory":
// rank/gpu_memory_budget.h after the warm-up); else on the CPU floor(space / block bytes) with
// --cpu-kv-cache-space, or without it ceil(max_model_len / block_size) blocks per sequence for
// `sequences` sequences, capped at kDefaultCpuKvCacheMaxGib but never below one sequence.
// Touches no CUDA, so the launcher calls it before fork. Throws std::runtime_error (naming
// --cpu-kv-cache-space) when that space cannot hold a single block.
int plan_kv_cache_blocks(const KvCacheSizing& sizing, const ModelConfig& config, Device device);

// The CUDA warm-up step (ModelRunner::warm_up) that sizes every workspace slot and shows the
// peak activation memory the KV cache is sized around. It must be the costliest step the
// scheduler can send:
// - tokens = max(min(max_num_batched_tokens, max_num_seqs x max_model_len), max_num_seqs): the
//   token budget of a step (prefill, chunks, or mixed chunks and decodes), but never more than
//   max_num_seqs sequences of max_model_len can carry, or a decode of max_num_seqs rows. Not
//   max_model_len: with chunked prefill (EngineConfig::enable_chunked_prefill) a prompt longer
//   than the budget is prefilled a budget's worth per step, so no step holds more new tokens.
// - rows = logits rows sampled: max_num_seqs (a decode, or one per sequence of a step); the
//   step's ceil(tokens / max_model_len) sequences never outnumber them.
// The command stays inside every limit the executor enforces (ipc/step_limits.h).
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
// block_size)). Filtered sampling on every row (the sampler's longest path), row r in slot
// r mod num_slots (rows == num_slots for a warmup_shape of max_num_seqs == num_slots).
StepCommand warmup_step_command(const WarmupShape& shape, int block_table_width, int num_slots);

}  // namespace nanovllm
