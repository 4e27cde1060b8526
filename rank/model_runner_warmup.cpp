// ModelRunner's CUDA start-up (nano-vllm's warmup_model, allocate_kv_cache and
// capture_cudagraph): a warm-up at the largest step (max_num_batched_tokens tokens, not
// max_model_len: see warmup_shape in rank/kv_cache_sizing.h) sizes every workspace slot and
// shows the peak activation memory; the KV cache gets what the memory budget leaves; the
// decode graphs are captured over the now fixed buffers.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

#include "ipc/step_limits.h"
#include "kernels/env_choice.h"
#include "kernels/sampler.h"
#include "rank/cuda_exec_resources.h"
#include "rank/cuda_graph_runner.h"
#include "rank/gpu_memory_budget.h"
#include "rank/kv_cache_sizing.h"
#include "rank/model_runner.h"
#include "rank/slot_sampling_state.h"

namespace nanovllm {

namespace {

cudaMemPool_t default_pool() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaMemPool_t pool = nullptr;
  CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, dev));
  return pool;
}

uint64_t pool_attr(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t v = 0;
  CUDA_CHECK(cudaMemPoolGetAttribute(pool, attr, &v));
  return v;
}

}  // namespace

GpuMemoryBudget ModelRunner::warm_up(const ModelRunnerOptions& o, uint64_t weights_bytes) {
  // The token budget, not max_model_len, sizes the activations: with chunked prefill a
  // prompt longer than the budget takes several steps, and the worst step (budget tokens
  // whose contexts reach max_model_len) needs no more activation memory than its token count
  // says (rank/kv_cache_sizing.h, warmup_shape), so the KV cache gets the rest.
  const WarmupShape shape = warmup_shape(o.max_num_batched_tokens, o.max_num_seqs, o.max_model_len);
  const int64_t tokens = shape.tokens, rows = shape.rows;
  const int width = static_cast<int>(max_blocks_per_seq(o.max_model_len, block_size_));
  const int rank = comm_->rank();

  const GpuMemInfo before = gpu_mem_info();
  cudaMemPool_t pool = default_pool();  // any stream-ordered scratch comes from here
  uint64_t zero = 0;
  CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
  allocate_kv_cache(1);  // placeholder, see warmup_step_command
  model_->reserve_decode_scratch();
  // An fp8 cache's prefill staging (Qwen3ForCausalLM::reserve_fp8_prefill_staging), sized for
  // a step of the whole token budget beside one sequence at max_model_len, plus a partial block
  // per sequence: the prefills of long prompts and of batches without prefix hits fit.
  model_->reserve_fp8_prefill_staging(
      (o.max_num_batched_tokens + block_size_ - 1) / block_size_ + width + o.max_num_seqs,
      static_cast<int64_t>(o.max_num_seqs) * width);
  logits_ = DeviceBuffer(static_cast<size_t>(rows * config_.vocab_size) * sizeof(float), device_);
  const auto t0 = std::chrono::steady_clock::now();
  const StepCommand cmd = warmup_step_command(shape, width, o.max_num_seqs);
  const TensorView logits = run_model(cmd);
  if (rank == 0) sample(cmd, logits);
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  kv_cache_ = DeviceBuffer();  // the layers' stale binding is replaced before any other step
  const GpuMemInfo after = gpu_mem_info();
  const uint64_t pool_high = pool_attr(pool, cudaMemPoolAttrReservedMemHigh);
  const uint64_t pool_now = pool_attr(pool, cudaMemPoolAttrReservedMemCurrent);
  spdlog::info(
      "rank {}: warm-up prefill of {} tokens in {} sequences with contexts of {} ({} rows "
      "sampled) took {:.2f} s",
      rank, tokens, cmd.num_seqs(), o.max_model_len, rows,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  GpuMemoryMeasurements m;
  m.total_bytes = after.total_bytes;
  m.free_bytes = after.free_bytes;
  m.weights_bytes = weights_bytes;
  m.activation_held_bytes =
      before.free_bytes > after.free_bytes ? before.free_bytes - after.free_bytes : 0;
  // What the pool still holds is already in the free-memory drop.
  m.activation_transient_bytes = pool_high > pool_now ? pool_high - pool_now : 0;
  m.cublas_workspace_bytes = CudaExecResources::kCublasWorkspaceBytes;
  // Sampling from shards doubles the graphs (each batch size in both forms); small sizes have
  // short-context twins.
  m.cuda_graph_bytes = o.enforce_eager
                           ? 0
                           : CudaGraphRunner::graph_bytes_estimate(
                                 CudaGraphRunner::graph_count(o.max_num_seqs, o.max_model_len,
                                                              sample_from_shards_, cluster_bound()),
                                 comm_->world_size(), static_cast<int>(config_.num_hidden_layers),
                                 graph_all_reduces_in_kernels(o.max_num_seqs));
  m.kv_block_bytes = kv_block_bytes(config_, comm_->world_size(), block_size_, kv_dtype_);
  m.gpu_memory_utilization = o.gpu_memory_utilization;
  const GpuMemoryBudget budget = plan_gpu_memory(m);
  spdlog::info("rank {}: {}", rank, describe_gpu_memory(m, budget));
  return budget;
}

std::function<int(int)> ModelRunner::cluster_bound() const {
  return [this](int b) { return model_->decode_cluster_context_bound(b); };
}

bool ModelRunner::graph_all_reduces_in_kernels(int max_num_seqs) const {
  // The largest graph's all-reduce: [max batch, hidden] bf16 (smaller graphs' are smaller).
  const std::vector<int> sizes = CudaGraphRunner::graph_batch_sizes(max_num_seqs);
  const size_t bytes = static_cast<size_t>(sizes.back()) *
                       static_cast<size_t>(config_.hidden_size) * dtype_size(DType::kBf16);
  return comm_->all_reduce_in_kernels(bytes);
}

int ModelRunner::agree_on_kv_blocks(const ModelRunnerOptions& o, const GpuMemoryBudget& budget) {
  const int rank = comm_->rank(), tp_size = comm_->world_size();
  if (o.num_kv_blocks > 0) {  // forced: the measurement is advice only
    if (!budget.ok() || budget.num_blocks < o.num_kv_blocks)
      spdlog::warn("rank {}: {} KV blocks forced, the memory budget allows {}", rank,
                   o.num_kv_blocks, budget.ok() ? budget.num_blocks : 0);
    return o.num_kv_blocks;
  }
  // Every rank must allocate the same count (rank 0's block ids index every cache): the
  // smallest budget over the ranks.
  int64_t blocks = budget.ok() ? budget.num_blocks : 0;
  if (tp_size > 1) blocks = comm_->all_reduce_min(blocks, ctx_);
  if (blocks <= 0)
    throw std::runtime_error(
        "rank " + std::to_string(rank) + ": " +
        (budget.ok() ? std::string("another rank has no room for the KV cache") : budget.error));
  if (blocks < budget.num_blocks)
    spdlog::info("rank {}: {} KV blocks (the smallest over the ranks)", rank, blocks);
  return static_cast<int>(blocks);
}

bool ModelRunner::library_next_at_start() const {
  // Measured on one GPU only (bench/README.md, issue 33): at --tp > 1 the kernels behind cuBLAS
  // include the peer all-reduces, whose early launch no multi-GPU run has measured.
  // NANOVLLM_LIBRARY_NEXT_LAUNCH=at-end keeps the launch at the GEMM's end (comparisons).
  static const bool at_start =
      kernels::env_choice("NANOVLLM_LIBRARY_NEXT_LAUNCH", {"auto", "at-end"}) == "auto";
  return at_start && comm_->world_size() == 1;
}

void ModelRunner::capture_cuda_graphs(const ModelRunnerOptions& o) {
  const int64_t rows =
      static_cast<int64_t>(logits_.nbytes() / (sizeof(float) * config_.vocab_size));
  const GpuMemInfo before = gpu_mem_info();
  const auto t0 = std::chrono::steady_clock::now();
  graphs_ = std::make_unique<CudaGraphRunner>(
      CudaGraphRunner::graph_batch_sizes(o.max_num_seqs),
      static_cast<int>(max_blocks_per_seq(o.max_model_len, block_size_)), o.max_model_len,
      logits_.view(DType::kF32, {rows, config_.vocab_size}), cluster_bound());
  graphs_->capture(
      [this](const DecodeGraphInputs& in, bool from_shards) {
        const TensorView hidden = model_->forward(in.input_ids, in.positions, in.meta, ctx_);
        if (from_shards) {  // rows in order; the decode row's input position, as below
          draw_from_shards(model_->compute_shard_logits(hidden, TensorView(), ctx_),
                           in.sample_slots, in.positions, in.out_tokens);
          return;
        }
        model_->compute_logits(in.logits, hidden, TensorView(), ctx_);  // rows in order
        if (comm_->rank() != 0) return;                                 // only rank 0 samples
        // The decode row's input position: the sampler draws for the token after it. The
        // logprobs kernel is part of every graph: rows whose slot asks for none leave at once.
        const int64_t b = in.logits.size(0);
        kernels::SamplingBatch batch;
        batch.logits = in.logits;
        batch.slots = in.sample_slots;
        batch.positions = in.positions;
        batch.params = sampling_->params();
        batch.processed = sampling_->processed(b);
        batch.out_tokens = in.out_tokens;
        batch.last_tokens = sampling_->last_tokens();
        batch.logprobs = sampling_->logprobs(b);
        kernels::sample(batch, ctx_);
      },
      ctx_.stream, sample_from_shards_, library_next_at_start());
  const GpuMemInfo after = gpu_mem_info();
  const uint64_t used =
      before.free_bytes > after.free_bytes ? before.free_bytes - after.free_bytes : 0;
  const uint64_t estimate = CudaGraphRunner::graph_bytes_estimate(
      static_cast<size_t>(graphs_->num_graphs()), comm_->world_size(),
      static_cast<int>(config_.num_hidden_layers), graph_all_reduces_in_kernels(o.max_num_seqs));
  spdlog::info(
      "rank {}: captured {} decode CUDA graphs (batch 1..{}{}; {} kernels launched at a cuBLAS "
      "GEMM's start) in {:.2f} s, using {} (estimate {})",
      comm_->rank(), graphs_->num_graphs(), graphs_->max_batch(),
      sample_from_shards_ ? "; gathering logits and sampling from shards" : "",
      graphs_->library_edges_moved(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
      format_gib(static_cast<double>(used)), format_gib(static_cast<double>(estimate)));
  if (used > estimate)
    spdlog::warn(
        "rank {}: the CUDA graphs use {} more than the {} the KV-cache budget reserved for them "
        "(--gpu-memory-utilization's headroom absorbs it; lower it if memory runs out)",
        comm_->rank(), format_gib(static_cast<double>(used - estimate)),
        format_gib(static_cast<double>(estimate)));
}

}  // namespace nanovllm
