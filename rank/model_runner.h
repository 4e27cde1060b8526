// The per-rank worker's model half (nano-vllm's ModelRunner): loads this rank's shard of
// the weights, owns the KV cache, turns a scheduled batch into a StepCommand
// (prepare_prefill / prepare_decode, static so rank 0 can build the command it broadcasts),
// and executes commands: forward pass on every rank, sampling on rank 0.
// Backend-neutral: buffers are DeviceBuffers, ops go through the kernels/ dispatchers; the
// device is fixed at construction. On CUDA the runner owns a stream + cuBLAS handle, and the
// options constructor adds nano-vllm's start-up: warm-up at the largest step, KV cache sized
// from the GPU's memory, decode CUDA graphs.
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

class CudaExecResources;
class CudaGraphRunner;

struct ModelRunnerOptions {
  int num_kv_blocks = 0;               // > 0: exactly that; <= 0: sized from memory (CUDA only)
  double gpu_memory_utilization = 0.9;  // CUDA: fraction of the GPU this process may fill
  bool enforce_eager = false;          // CUDA: no decode graphs
  int max_num_batched_tokens = 16384;  // the largest step (prefill tokens)
  int max_num_seqs = 512;              // the largest batch (decode rows, logits rows)
  int max_model_len = 4096;            // the longest sequence (block-table width)
  int cpu_threads = 0;                 // CPU: <= 0 picks hardware_concurrency()
};

class ModelRunner {
 public:
  // num_kv_blocks > 0 sizes the cache (tests force tiny caches); cpu_threads <= 0 picks
  // std::thread::hardware_concurrency(). Throws ModelFolderError for a bad checkpoint.
  ModelRunner(const std::filesystem::path& model_dir, const ModelConfig& config, int tp_rank,
              int tp_size, Communicator& comm, int num_kv_blocks, int block_size, Device device,
              int cpu_threads = 0);
  // The production start-up. CUDA: warm-up (a prefill of max_num_batched_tokens tokens in
  // sequences of max_model_len, logits and sampling for max_num_seqs rows), KV cache sized
  // from memory when options.num_kv_blocks <= 0 (std::runtime_error naming the figures when
  // not one block fits; every rank ends with the smallest count), workspace frozen, decode
  // graphs captured unless enforce_eager. CPU: needs num_kv_blocks > 0, otherwise as above
  // minus the GPU parts. Steps must respect the three max_* limits.
  ModelRunner(const std::filesystem::path& model_dir, const ModelConfig& config, int tp_rank,
              int tp_size, Communicator& comm, int block_size, Device device,
              const ModelRunnerOptions& options);
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
  // The final block count (sized or forced): EngineConfig::num_kvcache_blocks.
  int num_kv_blocks() const { return num_kv_blocks_; }
  // Decode CUDA graphs captured (0: eager).
  int num_cuda_graphs() const;
  int tp_rank() const { return comm_->rank(); }
  Device device() const { return device_; }

 private:
  ModelRunner(const std::filesystem::path& model_dir, const ModelConfig& config, int tp_rank,
              int tp_size, Communicator& comm, int block_size, Device device,
              const ModelRunnerOptions& options, bool plan);
  TensorView upload(size_t slot, const void* data, DType dtype, std::initializer_list<int64_t> dims);
  // (Re)allocates the cache for num_blocks and binds it to the layers.
  void allocate_kv_cache(int num_blocks);
  // Logits [s, V] f32: the persistent buffer when the start-up sized one, else a slot.
  TensorView logits_rows(int64_t s);
  // CUDA start-up steps (model_runner_warmup.cpp).
  int warm_up_and_size(const ModelRunnerOptions& o, uint64_t weights_bytes, int tp_size);
  void capture_cuda_graphs(const ModelRunnerOptions& o);

  ModelConfig config_;
  Communicator* comm_;
  int num_kv_blocks_, block_size_;
  Device device_;
  std::unique_ptr<CudaExecResources> cuda_;  // CUDA only; outlives everything that uses ctx_
  ExecContext ctx_;
  std::unique_ptr<Qwen3ForCausalLM> model_;
  DeviceBuffer kv_cache_;  // [2, layers, num_kv_blocks, block_size, kv_heads / tp, head_dim] bf16
  Workspace inputs_;       // step inputs copied to the device, one slot each
  DeviceBuffer logits_;    // [max logits rows, V] f32 (options start-up on CUDA), else empty
  std::unique_ptr<CudaGraphRunner> graphs_;  // decode graphs; destroyed first
};

// The seed a sequence samples with: its SamplingParams::seed, or (unset) a fixed mix of its
// seq_id (splitmix64), so a run without seeds is still reproducible.
uint64_t sequence_seed(const Sequence& seq);

}  // namespace nanovllm
