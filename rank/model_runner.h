// The per-rank worker's model half (nano-vllm's ModelRunner): loads this rank's shard of
// the weights, owns the KV cache and executes the step commands rank 0 builds: the forward
// pass on every rank, sampling on rank 0 (the StepExecutor port of ipc/step_executor.h).
// Backend-neutral: buffers are DeviceBuffers, ops go through the kernels/ dispatchers; the
// device is fixed at construction. On CUDA the runner owns a stream + cuBLAS handle and runs
// nano-vllm's start-up: warm-up at the largest step, KV cache sized from the GPU's memory,
// decode CUDA graphs.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ipc/step_executor.h"
#include "ipc/step_limits.h"
#include "kernels/communicator.h"
#include "kernels/logprobs.h"
#include "layers/model_config.h"
#include "layers/qwen3_model.h"

namespace nanovllm {

class CudaExecResources;
class CudaGraphRunner;
class DecodeTraceWindow;
class TokenReadback;
class SlotSamplingState;
struct GpuMemoryBudget;

struct ModelRunnerOptions {
  Device device = Device::kCpu;
  int block_size = 256;                 // tokens per KV block
  int num_kv_blocks = 0;                // > 0: exactly that; <= 0: sized from memory (CUDA only)
  double gpu_memory_utilization = 0.9;  // CUDA: fraction of the GPU this process may fill
  bool enforce_eager = false;           // CUDA: no decode graphs
  int max_num_batched_tokens = 16384;   // the largest step (prefill tokens)
  int max_num_seqs = 512;               // the largest batch (decode rows, logits rows)
  int max_model_len = 4096;             // the longest sequence (block-table width)
  int cpu_threads = 0;                  // CPU: <= 0 picks hardware_concurrency()
  DType kv_cache_dtype = DType::kBf16;  // --kv-cache-dtype: bf16, or fp8 e4m3
  // CUDA: time every step with events from the start (set_step_timing switches it later).
  // Each timed step waits for its end event, so it is for rank 0, whose steps wait anyway.
  bool time_steps = false;
  // --tp on CUDA: seconds the NCCL set-up took before this runner (startup_timing() says it).
  double nccl_setup_s = 0;
  // --tp > 1: steps may sample from the vocabulary shards (StepCommand::sample_from_shards);
  // on CUDA the decode graphs then come in both forms. false: --disable-shard-sampling.
  bool sample_from_shards = true;
};

class ModelRunner final : public StepExecutor {
 public:
  // This rank's shard (comm.rank() of comm.world_size()). CUDA: warm-up (a prefill of
  // max_num_batched_tokens tokens in sequences of max_model_len, logits and sampling for
  // max_num_seqs rows), KV cache sized from memory when options.num_kv_blocks <= 0
  // (std::runtime_error naming the figures when not one block fits; every rank ends with the
  // smallest count), workspace frozen, decode graphs captured unless enforce_eager. CPU: needs
  // num_kv_blocks > 0. Steps must respect the three max_* limits. Throws ModelFolderError for
  // a bad checkpoint.
  ModelRunner(const std::filesystem::path& model_dir, const ModelConfig& config, Communicator& comm,
              const ModelRunnerOptions& options);
  ~ModelRunner() override;

  // The forward pass; on rank 0 also samples one token per logits row (other ranks return
  // none). Every rank must execute every command; EXIT is a no-op here.
  StepResult execute(const StepCommand& cmd) override;
  // Async scheduling (model_runner_launch.cpp): on one GPU with decode graphs, a decode step
  // is launched without waiting, its tokens copied to the host behind it, and the next decode
  // may be launched meanwhile with pending inputs (taken from the sampler's last_tokens). Other
  // steps (prefill, eager, logprobs, --tp > 1) run to the end at launch.
  void launch(const StepCommand& cmd) override;
  StepResult collect() override;
  bool accepts_pending_inputs(int num_seqs) const override;
  // The forward pass: logits [S, V] f32 on rank 0 (a workspace view valid until the next
  // call); an empty view on other ranks, and on every rank for a command that samples from
  // shards (it gathers no logits). Every rank takes the command's new slot parameters first
  // (a decode graph samples too, as part of its replay).
  TensorView run_model(const StepCommand& cmd);

  // Rank 0: one token per row of logits (from run_model of the same command), with the
  // parameters of each row's sampling slot.
  std::vector<int32_t> sample(const StepCommand& cmd, const TensorView& logits);

  // Bytes of KV cache per block on this rank (both K and V, every layer).
  // `kv_dtype`: the cache's element (bf16, or fp8 e4m3: half the bytes).
  static size_t kv_block_bytes(const ModelConfig& config, int tp_size, int block_size,
                               DType kv_dtype = DType::kBf16);

  const ModelConfig& config() const { return config_; }
  int block_size() const { return block_size_; }
  // The final block count (sized or forced): EngineConfig::num_kvcache_blocks.
  int num_kv_blocks() const override { return num_kv_blocks_; }
  // Benchmark instrumentation (ipc/step_executor.h). Step timing: CUDA only. Phase timer:
  // either device (the timer's own); decode then runs eagerly instead of through graphs.
  bool set_step_timing(bool on) override;
  std::optional<StepTiming> last_step_timing() const override { return last_timing_; }
  bool set_phase_timer(PhaseTimer* timer) override;
  std::optional<StartupTiming> startup_timing() const override { return startup_; }
  // Decode CUDA graphs captured (0: eager).
  int num_cuda_graphs() const;
  int tp_rank() const { return comm_->rank(); }
  Device device() const { return device_; }

 private:
  TensorView upload(size_t slot, const void* data, DType dtype,
                    std::initializer_list<int64_t> dims);
  // The forward pass; on the decode-graph path also the graph's sampled tokens (rank 0),
  // else an empty view.
  struct Forward {
    TensorView logits;      // [S, V] f32 (rank 0)
    TensorView out_tokens;  // [S] i32, device (graph replays only)
    // prompt_logprobs: the [P] rows' outputs on the device (rank 0; empty when none)
    kernels::LogprobsBatch prompt;
  };
  Forward forward_step(const StepCommand& cmd);
  // Sampling and readback (model_runner_sampling.cpp).
  // Every rank: the LM head over the command's prompt_logprobs rows, in chunks of
  // max_logits_rows_; rank 0 also computes their logprobs (its returned batch's outputs).
  kernels::LogprobsBatch prompt_logprobs(const StepCommand& cmd, const TensorView& hidden);
  // sample() on the device: [S] i32 (and the rows' logprobs in the sampling state when the
  // command asks), valid until the next step.
  TensorView sample_rows(const StepCommand& cmd, const TensorView& logits);
  // Every rank: the candidates of its LM-head shard [S, shard] f32 for rows of slots [S] i32 at
  // positions [S] i32, gathered to rank 0, which merges them into out_tokens [S] i32
  // (kernels/shard_sampler.h).
  void draw_from_shards(const TensorView& shard_logits, const TensorView& slots,
                        const TensorView& positions, const TensorView& out_tokens);
  // Device tokens [S] -> host, the step's one synchronisation.
  std::vector<int32_t> read_tokens(const TensorView& tokens);
  // Device logprob outputs -> host (after read_tokens: the stream is drained).
  LogprobRows read_logprob_rows(const TensorView& logprob, const TensorView& rank,
                                const TensorView& top_ids, const TensorView& top_logprobs);
  // (Re)allocates the cache for num_blocks and binds it to the layers.
  void allocate_kv_cache(int num_blocks);
  // Logits [s, V] f32: the persistent buffer when the start-up sized one, else a slot.
  TensorView logits_rows(int64_t s);
  // CUDA start-up steps (model_runner_warmup.cpp).
  // The warm-up step at the largest sizes, then this rank's memory budget from what it used.
  GpuMemoryBudget warm_up(const ModelRunnerOptions& o, uint64_t weights_bytes);
  // The block count every rank allocates: the forced one, else the smallest budget.
  int agree_on_kv_blocks(const ModelRunnerOptions& o, const GpuMemoryBudget& budget);
  void capture_cuda_graphs(const ModelRunnerOptions& o);
  // Whether the decode graphs launch our kernels behind cuBLAS at its start
  // (kernels/graph_launch_order.h): one GPU, unless NANOVLLM_LIBRARY_NEXT_LAUNCH=at-end.
  bool library_next_at_start() const;
  // Whether every decode graph's all-reduces are the peer path's kernels (no NCCL node).
  bool graph_all_reduces_in_kernels(int max_num_seqs) const;
  // The decode graphs' cluster bound of a batch size (Qwen3ForCausalLM's, for this rank).
  std::function<int(int)> cluster_bound() const;  // CudaGraphRunner::ClusterBound

  ModelConfig config_;
  Communicator* comm_;
  int num_kv_blocks_, block_size_;
  DType kv_dtype_;  // the cache's element: ModelRunnerOptions::kv_cache_dtype
  Device device_;
  std::unique_ptr<CudaExecResources> cuda_;  // CUDA only; outlives everything that uses ctx_
  ExecContext ctx_;
  std::unique_ptr<Qwen3ForCausalLM> model_;
  DeviceBuffer kv_cache_;  // [2, layers, num_kv_blocks, block_size, kv_heads / tp, head_dim] bf16
  Workspace inputs_;       // step inputs copied to the device, one slot each
  DeviceBuffer logits_;    // [max logits rows, V] f32 (options start-up on CUDA), else empty
  int64_t max_logits_rows_ = 0;  // max_num_seqs: the most logits rows one LM-head call makes
  StepLimits limits_;            // the options' max_* and block size: every command stays inside
  std::unique_ptr<SlotSamplingState> sampling_;  // per-slot parameters (workers: draw ones)
  bool sample_from_shards_ = false;              // --tp > 1 and not turned off
  std::unique_ptr<CudaGraphRunner> graphs_;      // decode graphs; destroyed first
  std::unique_ptr<DecodeTraceWindow> trace_;     // the kernel timeline's window (CUDA only)
  // Step timing (CUDA events, model_runner.cpp); null while off.
  struct StepEvents;
  std::unique_ptr<StepEvents> step_events_;
  void forget_previous_step_end();  // the next executed step's gap is 0
  std::optional<StepTiming> last_timing_;
  // Steps launched and not collected, oldest first: a result already there, or the readback
  // slot its tokens are copied into.
  struct Launched {
    std::optional<StepResult> result;
    int slot = -1;
    int64_t rows = 0;
  };
  std::deque<Launched> launched_;
  std::unique_ptr<TokenReadback> readback_;  // rank 0 of one GPU with decode graphs
  int last_collected_slot_ = -1;             // the last collected overlapped step's slot
  StartupTiming startup_;
};

}  // namespace nanovllm
