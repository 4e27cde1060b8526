// ModelRunner's sampling and readback (nano-vllm's ModelRunner.sample and the token copy to the
// host): the draw on rank 0's full logits or from every rank's vocabulary shard, the prompt
// logprobs in chunks, and the copies of tokens and logprobs to the host.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/phase_timer.h"
#include "kernels/sampler.h"
#include "kernels/shard_sampler.h"
#include "rank/model_runner.h"
#include "rank/model_runner_inputs.h"
#include "rank/slot_sampling_state.h"

namespace nanovllm {

using namespace runner_inputs;  // NOLINT(google-build-using-namespace): this class's own slots

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

}  // namespace nanovllm
