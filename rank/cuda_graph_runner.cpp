#include "rank/cuda_graph_runner.h"

#include <algorithm>
#include <numeric>

namespace nanovllm {

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

CudaGraphRunner::CudaGraphRunner(std::vector<int> batch_sizes, int max_blocks_per_seq,
                                 int max_model_len, const TensorView& logits)
    : sizes_(std::move(batch_sizes)),
      width_(max_blocks_per_seq),
      max_model_len_(max_model_len),
      logits_(logits) {
  CHECK(!sizes_.empty());
  CHECK(std::is_sorted(sizes_.begin(), sizes_.end()));
  CHECK_GT(width_, 0);
  CHECK_GE(logits_.size(0), sizes_.back());
  const size_t max_bs = static_cast<size_t>(sizes_.back());
  const size_t row = max_bs * sizeof(int32_t);
  input_ids_ = DeviceBuffer(row, Device::kCuda);
  positions_ = DeviceBuffer(row, Device::kCuda);
  slot_mapping_ = DeviceBuffer(row, Device::kCuda);
  context_lens_ = DeviceBuffer(row, Device::kCuda);
  block_tables_ = DeviceBuffer(row * static_cast<size_t>(width_), Device::kCuda);
  row_ids_ = DeviceBuffer(row, Device::kCuda);
  sample_slots_ = DeviceBuffer(row, Device::kCuda);
  out_tokens_ = DeviceBuffer(row, Device::kCuda);
  std::vector<int32_t> ids(max_bs);
  std::iota(ids.begin(), ids.end(), 0);
  row_ids_.copy_from_host(ids.data(), row);
}

CudaGraphRunner::~CudaGraphRunner() {
  for (cudaGraphExec_t e : execs_) cudaGraphExecDestroy(e);  // no throw from a destructor
}

DecodeGraphInputs CudaGraphRunner::inputs(int b) const {
  DecodeGraphInputs in;
  in.input_ids = input_ids_.view(DType::kI32, {b});
  in.positions = positions_.view(DType::kI32, {b});
  in.meta.is_prefill = false;
  in.meta.slot_mapping = slot_mapping_.view(DType::kI32, {b});
  in.meta.context_lens = context_lens_.view(DType::kI32, {b});
  in.meta.block_tables = block_tables_.view(DType::kI32, {b, width_});
  // A host bound baked into the graph: it only sizes the split-KV work, the kernel reads the
  // live lengths from context_lens at replay.
  in.meta.max_context_len = max_model_len_;
  in.row_ids = row_ids_.view(DType::kI32, {b});
  in.logits = logits_.slice_rows(0, b);
  in.sample_slots = sample_slots_.view(DType::kI32, {b});
  in.out_tokens = out_tokens_.view(DType::kI32, {b});
  return in;
}

void CudaGraphRunner::upload(int b, cudaStream_t stream) {
  auto put = [&](DeviceBuffer& dst, const std::vector<int32_t>& src) {
    // Pageable source: the copy is staged before the call returns, so the vector may change.
    CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.size() * sizeof(int32_t),
                               cudaMemcpyHostToDevice, stream));
  };
  CHECK_EQ(h_ids_.size(), static_cast<size_t>(b));
  put(input_ids_, h_ids_);
  put(positions_, h_pos_);
  put(slot_mapping_, h_slots_);
  put(context_lens_, h_ctx_);
  put(block_tables_, h_bt_);
  put(sample_slots_, h_sample_slots_);
}

void CudaGraphRunner::capture(const Forward& forward, cudaStream_t stream) {
  CHECK(execs_.empty());
  CHECK(stream != nullptr);  // the legacy default stream cannot be captured
  execs_.assign(sizes_.size(), nullptr);
  for (size_t i = sizes_.size(); i-- > 0;) {
    const int b = sizes_[i];
    // Harmless padding everywhere: no KV store, no keys read.
    h_ids_.assign(b, 0);
    h_pos_.assign(b, 0);
    h_slots_.assign(b, -1);
    h_ctx_.assign(b, 0);
    h_bt_.assign(static_cast<size_t>(b) * width_, -1);
    h_sample_slots_.assign(b, -1);
    upload(b, stream);
    const DecodeGraphInputs in = inputs(b);
    forward(in);  // eager: lazy initialisation (cuBLAS heuristics, occupancy queries)
    CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      forward(in);
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);  // leave the stream usable before rethrowing
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const cudaError_t err = cudaGraphInstantiate(&execs_[i], graph, 0);
    cudaGraphDestroy(graph);
    CUDA_CHECK(err);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

DecodeGraphOutputs CudaGraphRunner::replay(const StepCommand& cmd, cudaStream_t stream) {
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
  h_ids_.assign(cmd.input_ids.begin(), cmd.input_ids.end());
  h_ids_.resize(b, 0);
  h_pos_.assign(cmd.positions.begin(), cmd.positions.end());
  h_pos_.resize(b, 0);
  h_slots_.assign(cmd.slot_mapping.begin(), cmd.slot_mapping.end());
  h_slots_.resize(b, -1);
  h_ctx_.assign(cmd.context_lens.begin(), cmd.context_lens.end());
  h_ctx_.resize(b, 0);
  h_sample_slots_.assign(cmd.sample_slots.begin(), cmd.sample_slots.end());
  h_sample_slots_.resize(b, -1);
  h_bt_.assign(static_cast<size_t>(b) * width_, -1);
  for (int64_t r = 0; r < n; ++r)
    std::copy_n(cmd.block_tables.begin() + r * w, w, h_bt_.begin() + r * width_);
  upload(b, stream);
  CUDA_CHECK(cudaGraphLaunch(execs_[i], stream));
  return {logits_.slice_rows(0, n), out_tokens_.view(DType::kI32, {n})};
}

}  // namespace nanovllm
