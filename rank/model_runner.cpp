#include "rank/model_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

#include "kernels/kv_cache.h"
#include "kernels/phase_timer.h"
#include "kernels/sampler.h"
#include "layers/checkpoint.h"
#include "rank/cuda_exec_resources.h"
#include "rank/cuda_graph_runner.h"
#include "rank/decode_trace_window.h"
#include "rank/gpu_memory_budget.h"
#include "rank/model_runner_inputs.h"
#include "rank/prefill_attention_split.h"
#include "rank/slot_sampling_state.h"
#include "rank/token_readback.h"

namespace nanovllm {

using namespace runner_inputs;  // NOLINT(google-build-using-namespace): this class's own slots

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

// Three events so a step's start can be measured against the previous step's end.
struct ModelRunner::StepEvents {
  cudaEvent_t start = nullptr, end = nullptr, previous_end = nullptr;
  bool has_previous = false;
  StepEvents() {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&end));
    CUDA_CHECK(cudaEventCreate(&previous_end));
  }
  ~StepEvents() {  // no throwing in a destructor: a failure only leaks an event
    cudaEventDestroy(start);
    cudaEventDestroy(end);
    cudaEventDestroy(previous_end);
  }
  StepEvents(const StepEvents&) = delete;
  StepEvents& operator=(const StepEvents&) = delete;
};

size_t ModelRunner::kv_block_bytes(const ModelConfig& c, int tp_size, int block_size,
                                   DType kv_dtype) {
  const int64_t kv_heads = std::max<int64_t>(1, c.num_key_value_heads / tp_size);
  const auto rows = static_cast<size_t>(2 * c.num_hidden_layers * block_size * kv_heads);
  // fp8 and int8: each row's i8 exponent or scale code beside its head_dim values.
  if (kernels::kv_cache_has_row_scales(kv_dtype)) return rows * static_cast<size_t>(c.head_dim + 1);
  return rows * static_cast<size_t>(c.head_dim) * dtype_size(kv_dtype);
}

ModelRunner::ModelRunner(const std::filesystem::path& model_dir, const ModelConfig& config,
                         Communicator& comm, const ModelRunnerOptions& options)
    : config_(config),
      comm_(&comm),
      num_kv_blocks_(0),
      block_size_(options.block_size),
      kv_dtype_(options.kv_cache_dtype),
      device_(options.device),
      inputs_(options.device) {
  const Device device = options.device;
  const int tp_rank = comm.rank(), tp_size = comm.world_size();
  CHECK_GT(block_size_, 0);
  if (device == Device::kCpu && options.num_kv_blocks <= 0)
    throw std::invalid_argument(
        "the CPU backend needs an explicit KV-cache block count "
        "(sizing the cache from memory is CUDA only)");
  ctx_.cpu_threads = options.cpu_threads > 0
                         ? options.cpu_threads
                         : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ctx_.tp_size = tp_size;
  startup_.nccl_setup_s = options.nccl_setup_s;
  auto phase_start = std::chrono::steady_clock::now();
  GpuMemInfo before;
  if (device == Device::kCuda) {
    cuda_ = std::make_unique<CudaExecResources>();
    cuda_->fill(ctx_);
    before = gpu_mem_info();
  }
  // Every rank: workers keep the draw parameters their shard candidates read.
  sampling_ = std::make_unique<SlotSamplingState>(options.max_num_seqs, config_.vocab_size, device,
                                                  tp_rank, tp_size);
  sample_from_shards_ = tp_size > 1 && options.sample_from_shards;
  max_logits_rows_ = options.max_num_seqs;
  limits_ = StepLimits{options.max_num_batched_tokens, options.max_num_seqs, options.max_model_len,
                       options.block_size};
  {
    const Checkpoint ckpt = Checkpoint::open(model_dir);
    validate_checkpoint(config_, ckpt);
    model_ = std::make_unique<Qwen3ForCausalLM>(config_, ckpt, ShardInfo{tp_rank, tp_size, device},
                                                comm);
  }  // the mappings are released here; every weight now lives in its own buffer
  uint64_t weights_bytes = 0;
  if (device == Device::kCuda) {
    // The uploads ran on the legacy default stream, which our non-blocking stream ignores.
    CUDA_CHECK(cudaDeviceSynchronize());
    const size_t free_now = gpu_mem_info().free_bytes;
    weights_bytes = before.free_bytes > free_now ? before.free_bytes - free_now : 0;
  }
  startup_.load_s = seconds_since(phase_start);
  phase_start = std::chrono::steady_clock::now();
  const bool cuda_startup = device == Device::kCuda;
  if (cuda_startup) trace_ = std::make_unique<DecodeTraceWindow>(tp_rank);
  const int blocks = cuda_startup ? agree_on_kv_blocks(options, warm_up(options, weights_bytes))
                                  : options.num_kv_blocks;
  allocate_kv_cache(blocks);
  startup_.warmup_s = seconds_since(phase_start);
  phase_start = std::chrono::steady_clock::now();
  if (cuda_startup) {
    model_->freeze_workspace();
    if (!options.enforce_eager) capture_cuda_graphs(options);
    if (graphs_ && comm.world_size() == 1)
      readback_ = std::make_unique<TokenReadback>(graphs_->max_batch());
  }
  startup_.graph_capture_s = graphs_ ? seconds_since(phase_start) : 0.0;
  if (options.time_steps) set_step_timing(true);
  spdlog::info(
      "rank {}: model loaded ({} layers, {} kv heads here), KV cache {} blocks x {} tokens "
      "({:.1f} MiB), decode {}",
      tp_rank, config_.num_hidden_layers, model_->num_kv_heads_local(), num_kv_blocks_, block_size_,
      kv_cache_.nbytes() / 1048576.0,
      num_cuda_graphs() > 0 ? fmt::format("through {} CUDA graphs", num_cuda_graphs())
                            : std::string("eager"));
}

void ModelRunner::allocate_kv_cache(int num_blocks) {
  CHECK_GT(num_blocks, 0);
  kv_cache_ = DeviceBuffer();  // the old cache goes first: its memory may be needed now
  num_kv_blocks_ = num_blocks;
  const int64_t hkv = model_->num_kv_heads_local();
  kv_cache_ = DeviceBuffer(
      kv_block_bytes(config_, comm_->world_size(), block_size_, kv_dtype_) * num_blocks, device_);
  kv_cache_.zero();
  if (device_ == Device::kCuda) CUDA_CHECK(cudaDeviceSynchronize());  // zeroed on the legacy stream
  const TensorView cache = kv_cache_.view(
      kv_dtype_, {2, config_.num_hidden_layers, num_blocks, block_size_, hkv, config_.head_dim});
  TensorView scales;  // fp8 and int8: the rows' exponents or scale codes, after the values
  if (kernels::kv_cache_has_row_scales(kv_dtype_))
    scales = TensorView(static_cast<char*>(cache.data) + cache.nbytes(), DType::kI8,
                        {2, config_.num_hidden_layers, num_blocks, hkv, block_size_}, device_);
  model_->bind_kv_cache(cache, scales);
}

int ModelRunner::num_cuda_graphs() const {
  return graphs_ ? graphs_->num_graphs() : 0;
}

TensorView ModelRunner::logits_rows(int64_t s) {
  // Rows beyond the warm-up's (a caller wanting every position's logits) take a growable
  // slot: the persistent buffer is held by the CUDA graphs.
  const size_t bytes = static_cast<size_t>(s * config_.vocab_size) * sizeof(float);
  if (logits_.nbytes() < bytes) return inputs_.get(kLogits, DType::kF32, {s, config_.vocab_size});
  return logits_.view(DType::kF32, {s, config_.vocab_size});
}

ModelRunner::~ModelRunner() = default;

TensorView ModelRunner::upload(size_t slot, const void* data, DType dtype,
                               std::initializer_list<int64_t> dims) {
  const TensorView v = inputs_.get(slot, dtype, dims);
  if (v.nbytes() == 0) return v;
  if (device_ == Device::kCpu)
    std::memcpy(v.data, data, v.nbytes());
  else
    CUDA_CHECK(cudaMemcpyAsync(v.data, data, v.nbytes(), cudaMemcpyHostToDevice, ctx_.stream));
  return v;
}

TensorView ModelRunner::run_model(const StepCommand& cmd) {
  return forward_step(cmd).logits;
}

ModelRunner::Forward ModelRunner::forward_step(const StepCommand& cmd) {
  CHECK(cmd.kind == StepKind::kPrefill || cmd.kind == StepKind::kDecode);
  const int64_t t = cmd.num_tokens(), b = cmd.num_seqs(), s = len(cmd.logits_indices);
  // The buffers were sized for these limits at start-up: a command outside them is rank 0's bug.
  const std::string violation = step_limit_violation(cmd, limits_);
  CHECK_MSG(violation.empty(), "step command outside the engine's limits: " + violation);
  sampling_->apply(cmd.new_slot_params, ctx_.stream);
  CHECK_MSG(!cmd.sample_from_shards || sample_from_shards_,
            "a step samples from shards on a runner without them (--tp 1 or turned off)");
  CHECK_MSG(!cmd.sample_from_shards || !cmd.sample_logprobs,
            "a step samples from shards and asks for logprobs (they need the whole row)");
  // A phase timer needs the eager path: its event records cannot live in a graph; the other
  // ranks take it too (cmd.eager), so that every rank runs the same rows.
  if (graphs_ && !ctx_.phase_timer && !cmd.eager && cmd.kind == StepKind::kDecode &&
      graphs_->can_run(b)) {
    trace_->before_replay(ctx_.stream, b);
    const DecodeGraphOutputs out = graphs_->replay(cmd, ctx_.stream, sampling_->last_tokens());
    trace_->after_replay(ctx_.stream, b);
    if (comm_->rank() != 0) return {};
    return {out.logits, out.out_tokens};
  }
  const TensorView input_ids = upload(kInputIds, cmd.input_ids.data(), DType::kI32, {t});
  const TensorView positions = upload(kPositions, cmd.positions.data(), DType::kI32, {t});
  AttentionMetadata meta;
  meta.is_prefill = cmd.kind == StepKind::kPrefill;
  meta.slot_mapping = upload(kSlotMapping, cmd.slot_mapping.data(), DType::kI32, {t});
  meta.block_tables =
      upload(kBlockTables, cmd.block_tables.data(), DType::kI32, {b, cmd.block_table_width});
  if (meta.is_prefill) {
    meta.cu_seqlens_q = upload(kCuQ, cmd.cu_seqlens_q.data(), DType::kI32, {b + 1});
    meta.cu_seqlens_k = upload(kCuK, cmd.cu_seqlens_k.data(), DType::kI32, {b + 1});
    meta.max_seqlen_q = cmd.max_seqlen_q;
    meta.max_seqlen_k = cmd.max_seqlen_k;
    // An fp8 cache: the leading one-query sequences go through the decode kernel
    // (rank/prefill_attention_split.h); the other fields then describe the rest, whose block
    // count decides whether the Hopper kernel's bf16 staging takes them.
    if (kernels::kv_cache_has_row_scales(kv_dtype_)) {
      const PrefillAttentionSplit split = split_prefill_attention(cmd, block_size_);
      meta.kv_blocks = split.rest_kv_blocks;
      if (split.lead_rows > 0) {
        meta.lead_rows = split.lead_rows;
        meta.lead_context_lens =
            upload(kContextLens, split.lead_context_lens.data(), DType::kI32, {split.lead_rows});
        meta.lead_max_context_len = split.lead_max_context_len;
        meta.max_seqlen_q = split.rest_max_seqlen_q;
        meta.max_seqlen_k = split.rest_max_seqlen_k;
      }
    }
  } else {
    CHECK_EQ(b, t);
    meta.context_lens = upload(kContextLens, cmd.context_lens.data(), DType::kI32, {b});
    meta.max_context_len = *std::max_element(cmd.context_lens.begin(), cmd.context_lens.end());
  }
  const TensorView hidden = model_->forward(input_ids, positions, meta, ctx_);
  Forward out;
  if (!cmd.prompt_logprobs_indices.empty()) out.prompt = prompt_logprobs(cmd, hidden);
  if (s == 0) return out;
  // A decode step's rows in order (the usual case) need no gather.
  bool in_order = s == t;
  for (int64_t i = 0; in_order && i < s; ++i) in_order = cmd.logits_indices[i] == i;
  const TensorView indices =
      in_order ? TensorView() : upload(kLogitsIndices, cmd.logits_indices.data(), DType::kI32, {s});
  if (cmd.sample_from_shards) {  // every rank's shard candidates, merged into rank 0's tokens
    const std::vector<int32_t> row_positions = sampled_row_positions(cmd);  // [S]
    CHECK_EQ(len(cmd.sample_slots), s);
    const TensorView out_tokens = inputs_.get(kOutTokens, DType::kI32, {s});
    draw_from_shards(model_->compute_shard_logits(hidden, indices, ctx_),
                     upload(kSampleSlots, cmd.sample_slots.data(), DType::kI32, {s}),
                     upload(kSamplePositions, row_positions.data(), DType::kI32, {s}), out_tokens);
    if (comm_->rank() == 0) out.out_tokens = out_tokens;
    return out;
  }
  // Every rank computes its logits shard; only rank 0's view receives the full rows.
  const TensorView logits = logits_rows(s);
  model_->compute_logits(logits, hidden, indices, ctx_);
  if (comm_->rank() != 0) return out;
  out.logits = logits;
  return out;
}

StepResult ModelRunner::execute(const StepCommand& cmd) {
  if (cmd.kind == StepKind::kExit) return {};
  if (step_events_) CUDA_CHECK(cudaEventRecord(step_events_->start, ctx_.stream));
  const Forward out = forward_step(cmd);
  StepResult result;
  if (comm_->rank() == 0 && !cmd.logits_indices.empty()) {
    result.sampled_token_ids =
        read_tokens(out.out_tokens.data ? out.out_tokens : sample_rows(cmd, out.logits));
    // After the tokens' synchronisation: these copies find the stream drained.
    if (cmd.sample_logprobs) {
      const kernels::SampledLogprobs l = sampling_->logprobs(len(cmd.logits_indices));
      result.sampled_logprobs = read_logprob_rows(l.logprob, l.rank, l.top_ids, l.top_logprobs);
    }
  }
  if (comm_->rank() == 0 && out.prompt.targets.data) {
    if (cmd.logits_indices.empty()) comm_->synchronize(ctx_.stream);
    const kernels::LogprobsBatch& p = out.prompt;
    result.prompt_logprobs =
        read_logprob_rows(p.target_logprob, p.target_rank, p.top_ids, p.top_logprobs);
  }
  if (step_events_) {
    // After the tokens' readback on rank 0, so the end is when the tokens reached the
    // host; the gap to the next start is then the host's time between steps.
    StepEvents& e = *step_events_;
    CUDA_CHECK(cudaEventRecord(e.end, ctx_.stream));
    CUDA_CHECK(cudaEventSynchronize(e.end));
    float gpu_ms = 0, gap_ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&gpu_ms, e.start, e.end));
    if (e.has_previous) CUDA_CHECK(cudaEventElapsedTime(&gap_ms, e.previous_end, e.start));
    std::swap(e.end, e.previous_end);
    e.has_previous = true;
    last_timing_ = StepTiming{gpu_ms, gap_ms};
  }
  return result;
}

void ModelRunner::forget_previous_step_end() {
  if (step_events_) step_events_->has_previous = false;
}

bool ModelRunner::set_step_timing(bool on) {
  last_timing_.reset();
  if (!on) {
    step_events_.reset();
    return true;
  }
  if (device_ != Device::kCuda) return false;  // CPU kernels are synchronous: no events
  if (!step_events_) step_events_ = std::make_unique<StepEvents>();
  step_events_->has_previous = false;
  return true;
}

bool ModelRunner::set_phase_timer(PhaseTimer* timer) {
  ctx_.phase_timer = timer;
  return true;
}

}  // namespace nanovllm
