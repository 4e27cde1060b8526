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
#include "kernels/shard_sampler.h"
#include "layers/checkpoint.h"
#include "rank/cuda_exec_resources.h"
#include "rank/cuda_graph_runner.h"
#include "rank/gpu_memory_budget.h"
#include "rank/prefill_attention_split.h"
#include "rank/slot_sampling_state.h"

namespace nanovllm {

namespace {
// Slots of inputs_ (one per uploaded step input).
enum InputSlot : size_t {
  kInputIds,
  kPositions,
  kSlotMapping,
  kCuQ,
  kCuK,
  kContextLens,
  kBlockTables,
  kLogitsIndices,
  kSampleSlots,
  kSamplePositions,
  kOutTokens,
  kLogits,
  // prompt_logprobs: [P] rows, targets and alternatives in; [P] logprob and rank, [P, W] top
  // ids and top logprobs out (W = kernels::kMaxLogprobs)
  kPromptRows,
  kPromptTargets,
  kPromptNumTop,
  kPromptLogprob,
  kPromptRank,
  kPromptTopIds,
  kPromptTopLogprobs
};
int64_t len(const auto& v) {
  return static_cast<int64_t>(v.size());
}
// Each sampled row's input position [S]: the sampler draws for the token after it.
std::vector<int32_t> sampled_row_positions(const StepCommand& cmd) {
  std::vector<int32_t> positions;
  positions.reserve(cmd.logits_indices.size());
  for (const int32_t row : cmd.logits_indices) {
    CHECK(row >= 0 && row < cmd.num_tokens());
    positions.push_back(cmd.positions[static_cast<size_t>(row)]);
  }
  return positions;
}
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
  const int blocks = cuda_startup ? agree_on_kv_blocks(options, warm_up(options, weights_bytes))
                                  : options.num_kv_blocks;
  allocate_kv_cache(blocks);
  startup_.warmup_s = seconds_since(phase_start);
  phase_start = std::chrono::steady_clock::now();
  if (cuda_startup) {
    model_->freeze_workspace();
    if (!options.enforce_eager) capture_cuda_graphs(options);
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
    const DecodeGraphOutputs out = graphs_->replay(cmd, ctx_.stream);
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

kernels::LogprobsBatch ModelRunner::prompt_logprobs(const StepCommand& cmd,
                                                    const TensorView& hidden) {
  const int64_t p = len(cmd.prompt_logprobs_indices);
  const bool rank0 = comm_->rank() == 0;
  const TensorView rows = upload(kPromptRows, cmd.prompt_logprobs_indices.data(), DType::kI32, {p});
  kernels::LogprobsBatch all;
  if (rank0) {
    CHECK_EQ(len(cmd.prompt_logprobs_targets), p);
    CHECK_EQ(len(cmd.prompt_logprobs_num_top), p);
    all.targets = upload(kPromptTargets, cmd.prompt_logprobs_targets.data(), DType::kI32, {p});
    all.num_top = upload(kPromptNumTop, cmd.prompt_logprobs_num_top.data(), DType::kI32, {p});
    all.target_logprob = inputs_.get(kPromptLogprob, DType::kF32, {p});
    all.target_rank = inputs_.get(kPromptRank, DType::kI32, {p});
    all.top_ids = inputs_.get(kPromptTopIds, DType::kI32, {p, kernels::kMaxLogprobs});
    all.top_logprobs = inputs_.get(kPromptTopLogprobs, DType::kF32, {p, kernels::kMaxLogprobs});
  }
  // Full-vocabulary logits for every row would not fit: chunks of the sampled rows' size,
  // whose logits buffer and LM-head scratch the warm-up already sized. Every rank runs each
  // chunk's LM head (its vocabulary shard, gathered on rank 0).
  for (int64_t begin = 0; begin < p; begin += max_logits_rows_) {
    const int64_t end = std::min(p, begin + max_logits_rows_);
    const TensorView logits = logits_rows(end - begin);
    model_->compute_logits(logits, hidden, rows.slice_rows(begin, end), ctx_);
    if (!rank0) continue;
    const kernels::LogprobsBatch chunk{logits,
                                       all.targets.slice_rows(begin, end),
                                       all.num_top.slice_rows(begin, end),
                                       TensorView(),
                                       all.target_logprob.slice_rows(begin, end),
                                       all.target_rank.slice_rows(begin, end),
                                       all.top_ids.slice_rows(begin, end),
                                       all.top_logprobs.slice_rows(begin, end)};
    kernels::token_logprobs(chunk, ctx_);
  }
  return all;
}

void ModelRunner::draw_from_shards(const TensorView& shard_logits, const TensorView& slots,
                                   const TensorView& positions, const TensorView& out_tokens) {
  const int64_t s = shard_logits.size(0);
  const bool rank0 = comm_->rank() == 0;
  const kernels::SamplingSlotParams params = sampling_->draw_params();
  kernels::ShardCandidatesBatch c;
  c.shard_logits = shard_logits;
  c.vocab_start = model_->vocab_start();
  c.columns = model_->vocab_columns();
  c.vocab = config_.vocab_size;
  c.slots = slots;
  c.positions = positions;
  c.params = params;
  c.keys = sampling_->shard_keys(s);
  {
    const PhaseScope phase(ctx_, Phase::kSampling);
    kernels::shard_candidates(c, ctx_);
  }
  const TensorView gathered = rank0 ? sampling_->gathered_keys(s) : TensorView();
  {
    const PhaseScope phase(ctx_, Phase::kLogitsGather);
    comm_->gather_to_root(c.keys, gathered, ctx_);
  }
  if (!rank0) return;
  const PhaseScope phase(ctx_, Phase::kSampling);
  kernels::ShardMergeBatch m;
  m.keys = gathered;
  m.slots = slots;
  m.positions = positions;
  m.vocab = config_.vocab_size;
  m.params = params;
  m.out_tokens = out_tokens;
  m.last_tokens = sampling_->last_tokens();
  kernels::merge_shard_candidates(m, ctx_);
}

std::vector<int32_t> ModelRunner::sample(const StepCommand& cmd, const TensorView& logits) {
  return read_tokens(sample_rows(cmd, logits));
}

TensorView ModelRunner::sample_rows(const StepCommand& cmd, const TensorView& logits) {
  CHECK_EQ(comm_->rank(), 0);  // rank 0 only
  const int64_t s = logits.size(0);
  CHECK_EQ(len(cmd.sample_slots), s);
  CHECK_EQ(len(cmd.logits_indices), s);
  const PhaseScope phase(ctx_, Phase::kSampling);
  const std::vector<int32_t> row_positions = sampled_row_positions(cmd);  // [S]
  kernels::SamplingBatch batch;
  batch.logits = logits;
  batch.slots = upload(kSampleSlots, cmd.sample_slots.data(), DType::kI32, {s});
  batch.positions = upload(kSamplePositions, row_positions.data(), DType::kI32, {s});
  batch.params = sampling_->params();
  batch.processed = sampling_->processed(s);
  batch.out_tokens = inputs_.get(kOutTokens, DType::kI32, {s});
  batch.last_tokens = sampling_->last_tokens();
  if (cmd.sample_logprobs) batch.logprobs = sampling_->logprobs(s);
  kernels::sample(batch, ctx_);
  return batch.out_tokens;
}

LogprobRows ModelRunner::read_logprob_rows(const TensorView& logprob, const TensorView& rank,
                                           const TensorView& top_ids,
                                           const TensorView& top_logprobs) {
  const size_t rows = static_cast<size_t>(logprob.size(0));
  LogprobRows out;
  out.width = static_cast<int>(top_ids.size(1));
  out.logprob.resize(rows);
  out.rank.resize(rows);
  out.top_ids.resize(rows * static_cast<size_t>(out.width));
  out.top_logprobs.resize(out.top_ids.size());
  const auto copy = [&](void* dst, const TensorView& src) {
    CHECK(src.is_contiguous());
    if (device_ == Device::kCpu)
      std::memcpy(dst, src.data, src.nbytes());
    else  // pageable destination: the copy is complete on return
      CUDA_CHECK(cudaMemcpyAsync(dst, src.data, src.nbytes(), cudaMemcpyDeviceToHost, ctx_.stream));
  };
  copy(out.logprob.data(), logprob);
  copy(out.rank.data(), rank);
  copy(out.top_ids.data(), top_ids);
  copy(out.top_logprobs.data(), top_logprobs);
  return out;
}

std::vector<int32_t> ModelRunner::read_tokens(const TensorView& tokens) {
  std::vector<int32_t> host(static_cast<size_t>(tokens.size(0)));
  if (device_ == Device::kCpu) {
    std::memcpy(host.data(), tokens.data, host.size() * sizeof(int32_t));
  } else {
    CUDA_CHECK(cudaMemcpyAsync(host.data(), tokens.data, host.size() * sizeof(int32_t),
                               cudaMemcpyDeviceToHost, ctx_.stream));
    comm_->synchronize(ctx_.stream);  // under NCCL: watched, so a dead peer cannot hang it
  }
  return host;
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
