#include "rank/cuda_graph_runner.h"

#include <algorithm>
#include <memory>
#include <type_traits>

#include "kernels/graph_launch_order.h"
#include "kernels/pending_inputs.h"
#include "kernels/skinny_gemm.h"

namespace nanovllm {

namespace {

// forward(in) captured on stream and instantiated; library_next_at_start: with the kernels of
// ours behind cuBLAS's launched at its start (kernels/graph_launch_order.h), adding the edges
// moved to *moved. The stream is usable again on any exit.
cudaGraphExec_t capture_graph(const CudaGraphRunner::Forward& forward, const DecodeGraphInputs& in,
                              bool from_shards, bool library_next_at_start, int* moved,
                              cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    forward(in, from_shards);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);  // leave the stream usable before rethrowing
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  // The graph itself goes on every exit from here (its instance keeps what it needs).
  const std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, decltype(&cudaGraphDestroy)> owned(
      graph, &cudaGraphDestroy);
  if (library_next_at_start) *moved += kernels::launch_dependents_at_library_kernel_start(graph);
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  return exec;
}

}  // namespace

std::vector<int> CudaGraphRunner::graph_batch_sizes(int max_num_seqs) {
  std::vector<int> sizes;
  for (int b : {1, 2, 4, 8})
    if (b <= max_num_seqs) sizes.push_back(b);
  for (int b = 16; b <= std::min(512, max_num_seqs); b += 16) sizes.push_back(b);
  // The largest batch the scheduler can form runs through a graph too (--max-num-seqs 100:
  // batches 97..100 would otherwise run eager).
  if (max_num_seqs > 0 && sizes.back() != max_num_seqs) sizes.push_back(max_num_seqs);
  return sizes;
}

int CudaGraphRunner::twin_bound(int b, int max_model_len, const ClusterBound& cluster_bound) {
  if (b > kShortContextMaxBatch) return 0;
  const int bound = cluster_bound(b);
  return bound > 0 && bound < max_model_len ? bound : 0;
}

size_t CudaGraphRunner::graph_count(int max_num_seqs, int max_model_len, bool from_shards,
                                    const ClusterBound& cluster_bound) {
  const std::vector<int> sizes = graph_batch_sizes(max_num_seqs);
  const size_t n =
      sizes.size() + static_cast<size_t>(std::count_if(sizes.begin(), sizes.end(), [&](int b) {
        return twin_bound(b, max_model_len, cluster_bound) > 0;
      }));
  return from_shards ? 2 * n : n;
}

size_t CudaGraphRunner::graph_bytes_estimate(size_t num_graphs, int tp_size, int num_layers,
                                             bool all_reduces_in_kernels) {
  size_t collectives = 0;  // NCCL nodes a graph holds
  if (tp_size > 1)
    collectives = all_reduces_in_kernels ? 1 : 2 * static_cast<size_t>(num_layers) + 2;
  if (num_graphs == 0) return 0;  // --enforce-eager
  return kGraphSetBytesEstimate +
         num_graphs * (kGraphBytesEstimate + collectives * kCollectiveNodeBytesEstimate);
}

CudaGraphRunner::CudaGraphRunner(std::vector<int> batch_sizes, int max_blocks_per_seq,
                                 int max_model_len, const TensorView& logits,
                                 const ClusterBound& cluster_bound)
    : sizes_(std::move(batch_sizes)),
      width_(max_blocks_per_seq),
      max_model_len_(max_model_len),
      logits_(logits) {
  CHECK(!sizes_.empty());
  CHECK(std::is_sorted(sizes_.begin(), sizes_.end()));
  for (int b : sizes_) twin_bounds_.push_back(twin_bound(b, max_model_len_, cluster_bound));
  CHECK_GT(width_, 0);
  CHECK_GE(logits_.size(0), sizes_.back());
  const size_t max_bs = static_cast<size_t>(sizes_.back());
  const size_t bytes = (offset(kBlockTables) + max_bs * width_) * sizeof(int32_t);
  staged_ = DeviceBuffer(bytes, Device::kCuda);
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned_), bytes, cudaHostAllocDefault));
  CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
  out_tokens_ = DeviceBuffer(max_bs * sizeof(int32_t), Device::kCuda);
}

CudaGraphRunner::~CudaGraphRunner() {
  // No throw from a destructor: a failure here only leaks.
  for (const auto* execs : {&execs_, &shard_execs_, &short_execs_, &short_shard_execs_})
    for (cudaGraphExec_t e : *execs)
      if (e != nullptr) cudaGraphExecDestroy(e);  // null: no twin, or a capture that threw
  if (uploaded_ != nullptr) {
    cudaEventSynchronize(uploaded_);  // the last copy may still read the pinned buffer
    cudaEventDestroy(uploaded_);
  }
  cudaFreeHost(pinned_);
}

TensorView CudaGraphRunner::device(Field f, std::initializer_list<int64_t> dims) const {
  TensorView v = staged_.view(DType::kI32, dims);
  v.data = static_cast<int32_t*>(staged_.data()) + offset(f);
  return v;
}

DecodeGraphInputs CudaGraphRunner::inputs(size_t i, bool short_context) const {
  const int b = sizes_[i];
  DecodeGraphInputs in;
  in.input_ids = device(kIds, {b});
  in.positions = device(kPositions, {b});
  in.meta.is_prefill = false;
  in.meta.slot_mapping = device(kSlots, {b});
  in.meta.context_lens = device(kContextLens, {b});
  in.meta.block_tables = device(kBlockTables, {b, width_});
  // A host bound baked into the graph (replay picks a twin only for contexts within its bound);
  // the kernels plan their work from the live context_lens at replay.
  in.meta.max_context_len = short_context ? twin_bounds_[i] : max_model_len_;
  in.logits = logits_.slice_rows(0, b);
  in.sample_slots = device(kSampleSlots, {b});
  in.out_tokens = out_tokens_.view(DType::kI32, {b});
  return in;
}

void CudaGraphRunner::wait_staging() {
  CUDA_CHECK(cudaEventSynchronize(uploaded_));  // at once when nothing was recorded yet
}

void CudaGraphRunner::stage_padding(int64_t n, int b) {
  std::fill(host(kIds) + n, host(kIds) + b, 0);
  std::fill(host(kPositions) + n, host(kPositions) + b, 0);
  std::fill(host(kSlots) + n, host(kSlots) + b, -1);
  std::fill(host(kContextLens) + n, host(kContextLens) + b, 0);
  std::fill(host(kSampleSlots) + n, host(kSampleSlots) + b, -1);
  std::fill(host(kBlockTables) + n * width_, host(kBlockTables) + int64_t{b} * width_, -1);
}

void CudaGraphRunner::upload(int b, cudaStream_t stream) {
  const size_t bytes = (offset(kBlockTables) + int64_t{b} * width_) * sizeof(int32_t);
  CUDA_CHECK(cudaMemcpyAsync(staged_.data(), pinned_, bytes, cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaEventRecord(uploaded_, stream));
}

void CudaGraphRunner::capture(const Forward& forward, cudaStream_t stream, bool from_shards,
                              bool library_next_at_start) {
  CHECK(execs_.empty());
  CHECK(stream != nullptr);  // the legacy default stream cannot be captured
  execs_.assign(sizes_.size(), nullptr);
  if (from_shards) shard_execs_.assign(sizes_.size(), nullptr);
  // Eager runs before the first capture do the lazy initialisation outside any capture
  // (cuBLAS's per-shape set-up, module loading, our kernels' function attributes and
  // occupancy queries): one at the largest size, whose GEMMs go to cuBLAS, and one at every
  // size up to kSkinnyGemmMaxM, whose GEMMs may each pick another skinny-GEMM variant. Sizes
  // between take cuBLAS kernels the largest run set up; a capture-unsafe call on a path no
  // eager run took would fail its capture loudly (cudaErrorStreamCaptureUnsupported), not
  // record a wrong graph. Harmless padding everywhere: no KV store, no keys read.
  // sizes_[i] with a twin bound also has a short-context twin in each form (its eager run
  // below sets up the cluster kernel).
  static_assert(kShortContextMaxBatch <= kernels::kSkinnyGemmMaxM);
  short_execs_.assign(sizes_.size(), nullptr);
  if (from_shards) short_shard_execs_.assign(sizes_.size(), nullptr);
  // f(short_context, shards) for every graph of sizes_[i].
  const auto each_graph = [&](size_t i, const auto& f) {
    for (const bool shards : {false, true}) {
      if (shards && !from_shards) continue;
      f(false, shards);
      if (twin_bounds_[i] > 0) f(true, shards);
    }
  };
  wait_staging();
  stage_padding(0, sizes_.back());
  upload(sizes_.back(), stream);
  for (size_t i = sizes_.size(); i-- > 0;)
    if (i + 1 == sizes_.size() || sizes_[i] <= kernels::kSkinnyGemmMaxM)  // twins' sizes too
      each_graph(
          i, [&](bool short_context, bool shards) { forward(inputs(i, short_context), shards); });
  CUDA_CHECK(cudaStreamSynchronize(stream));
  for (size_t i = sizes_.size(); i-- > 0;)  // largest first
    each_graph(i, [&](bool short_context, bool shards) {
      std::vector<cudaGraphExec_t>& execs = short_context
                                                ? (shards ? short_shard_execs_ : short_execs_)
                                                : (shards ? shard_execs_ : execs_);
      execs[i] = capture_graph(forward, inputs(i, short_context), shards, library_next_at_start,
                               &library_edges_moved_, stream);
    });
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

DecodeGraphOutputs CudaGraphRunner::replay(const StepCommand& cmd, cudaStream_t stream,
                                           const TensorView& last_tokens) {
  CHECK(cmd.kind == StepKind::kDecode);
  const int64_t n = cmd.num_seqs();
  CHECK(can_run(n));
  CHECK_EQ(cmd.num_tokens(), n);
  CHECK_EQ(static_cast<int64_t>(cmd.context_lens.size()), n);
  CHECK_EQ(static_cast<int64_t>(cmd.logits_indices.size()), n);
  CHECK(cmd.sample_slots.empty() || static_cast<int64_t>(cmd.sample_slots.size()) == n);
  for (int64_t r = 0; r < n; ++r) CHECK_EQ(cmd.logits_indices[r], r);  // the graph's row_ids
  const int w = cmd.block_table_width;
  CHECK_MSG(w <= width_, "block table width " << w << " exceeds the graphs' " << width_
                                              << " (a sequence longer than max_model_len?)");
  const size_t i = static_cast<size_t>(
      std::lower_bound(sizes_.begin(), sizes_.end(), static_cast<int>(n)) - sizes_.begin());
  const int b = sizes_[i];
  // Live rows from the command, padded rows reset every time (a row live in the previous
  // replay must not keep its slot or its context into this one).
  wait_staging();
  std::copy_n(cmd.input_ids.begin(), n, host(kIds));
  std::copy_n(cmd.positions.begin(), n, host(kPositions));
  std::copy_n(cmd.slot_mapping.begin(), n, host(kSlots));
  std::copy_n(cmd.context_lens.begin(), n, host(kContextLens));
  if (cmd.sample_slots.empty())
    std::fill_n(host(kSampleSlots), n, -1);
  else
    std::copy_n(cmd.sample_slots.begin(), n, host(kSampleSlots));
  for (int64_t r = 0; r < n; ++r) {
    int32_t* row = host(kBlockTables) + r * width_;
    std::copy_n(cmd.block_tables.begin() + r * w, w, row);
    std::fill(row + w, row + width_, -1);
  }
  stage_padding(n, b);
  upload(b, stream);
  if (cmd.has_pending_inputs()) {
    CHECK_MSG(last_tokens.data != nullptr, "a decode step with pending inputs and no last tokens");
    CHECK_MSG(!cmd.sample_slots.empty(), "a decode step with pending inputs names no slots");
    kernels::cuda::resolve_pending_inputs(device(kIds, {n}), device(kSampleSlots, {n}), last_tokens,
                                          stream);
  }
  const bool twin =
      !short_execs_.empty() && short_execs_[i] != nullptr &&
      *std::max_element(cmd.context_lens.begin(), cmd.context_lens.end()) <= twin_bounds_[i];
  if (cmd.sample_from_shards) {
    CHECK_MSG(!shard_execs_.empty(), "a step samples from shards; no graph was captured for it");
    CUDA_CHECK(cudaGraphLaunch(twin ? short_shard_execs_[i] : shard_execs_[i], stream));
    return {TensorView(), out_tokens_.view(DType::kI32, {n})};
  }
  CUDA_CHECK(cudaGraphLaunch(twin ? short_execs_[i] : execs_[i], stream));
  return {logits_.slice_rows(0, n), out_tokens_.view(DType::kI32, {n})};
}

}  // namespace nanovllm
