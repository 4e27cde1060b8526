// The per-rank worker's model half (nano-vllm's ModelRunner): loads this rank's shard of
// the weights, owns the KV cache, turns a scheduled batch into a StepCommand
// (prepare_prefill / prepare_decode, static so rank 0 can build the command it broadcasts),
// and executes commands: forward pass on every rank, sampling on rank 0.
// Backend-neutral: buffers are DeviceBuffers, ops go through the kernels/ dispatchers; the
// device is fixed at construction (the CPU path is what runs today).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "engine/sequence.h"
#include "ipc/step_command.h"
#include "layers/model_config.h"
#include "layers/qwen3_model.h"

namespace nanovllm {

class ModelRunner {
 public:
  // num_kv_blocks > 0 sizes the cache (tests force tiny caches); cpu_threads <= 0 picks
  // std::thread::hardware_concurrency(). Throws ModelFolderError for a bad checkpoint.
  ModelRunner(const std::filesystem::path& model_dir, const ModelConfig& config, int tp_rank,
              int tp_size, Communicator& comm, int num_kv_blocks, int block_size, Device device,
              int cpu_threads = 0);
  ~ModelRunner();

  // Prefill: the tokens [num_cached_tokens, num_tokens) of each sequence; one sampled row
  // per sequence (its last token).
  static StepCommand prepare_prefill(std::span<Sequence* const> seqs, int block_size);
  // Decode: the last token of each sequence.
  static StepCommand prepare_decode(std::span<Sequence* const> seqs, int block_size);

  // The forward pass; on rank 0 also samples and returns one token per logits row (other
  // ranks return an empty vector). Every rank must execute every command.
  std::vector<int32_t> execute(const StepCommand& cmd);
  // The forward pass only: logits [S, V] f32 on rank 0 (a workspace view valid until the
  // next call); an empty view on other ranks.
  TensorView run_model(const StepCommand& cmd);

  // Rank 0: one token per row of logits (from run_model), with the command's sampling fields.
  std::vector<int32_t> sample(const StepCommand& cmd, const TensorView& logits);

  // Bytes of KV cache per block on this rank (both K and V, every layer).
  static size_t kv_block_bytes(const ModelConfig& config, int tp_size, int block_size);

  const ModelConfig& config() const { return config_; }
  int block_size() const { return block_size_; }
  int num_kv_blocks() const { return num_kv_blocks_; }
  int tp_rank() const { return comm_->rank(); }
  Device device() const { return device_; }

 private:
  TensorView upload(size_t slot, const void* data, DType dtype, std::initializer_list<int64_t> dims);

  ModelConfig config_;
  Communicator* comm_;
  int num_kv_blocks_, block_size_;
  Device device_;
  ExecContext ctx_;
  std::unique_ptr<Qwen3ForCausalLM> model_;
  DeviceBuffer kv_cache_;  // [2, layers, num_kv_blocks, block_size, kv_heads / tp, head_dim] bf16
  Workspace inputs_;       // step inputs copied to the device, one slot each
};

// The seed a sequence samples with: its SamplingParams::seed, or (unset) a fixed mix of its
// seq_id (splitmix64), so a run without seeds is still reproducible.
uint64_t sequence_seed(const Sequence& seq);

}  // namespace nanovllm
