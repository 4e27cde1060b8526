#include "layers/vocab_embedding.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "kernels/embedding.h"
#include "kernels/linear.h"
#include "kernels/phase_timer.h"

namespace nanovllm {

VocabParallelEmbedding::VocabParallelEmbedding(const Checkpoint& ckpt, const std::string& name,
                                               int64_t vocab_size, const ShardInfo& shard,
                                               Communicator& comm) {
  load(ckpt, name, vocab_size, shard, comm);
}

void VocabParallelEmbedding::load(const Checkpoint& ckpt, const std::string& name,
                                  int64_t vocab_size, const ShardInfo& s, Communicator& comm) {
  const CheckpointTensor& w = checkpoint_tensor(ckpt, name, 2);
  CHECK_GE(w.shape[0], vocab_size);
  const int64_t rows = (vocab_size + s.tp_size - 1) / s.tp_size;
  vocab_size_ = vocab_size;
  vocab_start_ = s.tp_rank * rows;
  comm_ = &comm;
  // Rows past the vocabulary (the last shard's padding) load as zeros.
  weight_ =
      Parameter::load({RowRange{&w, vocab_start_, vocab_start_ + rows}}, 0, w.shape[1], s.device);
}

void VocabParallelEmbedding::forward(const TensorView& out, const TensorView& ids,
                                     const ExecContext& ctx) const {
  {
    const PhaseScope phase(ctx, Phase::kElementwise);
    kernels::embedding(out, ids, weight(), vocab_start_, ctx);
  }
  if (comm_->world_size() == 1) return;
  const PhaseScope phase(ctx, Phase::kAllReduce);
  comm_->all_reduce_sum(out, ctx);
}

ParallelLMHead::ParallelLMHead(const Checkpoint& ckpt, const std::string& name, int64_t vocab_size,
                               const ShardInfo& shard, Communicator& comm) {
  load(ckpt, name, vocab_size, shard, comm);
}

ParallelLMHead::ParallelLMHead(const VocabParallelEmbedding& tied_to, Communicator& comm)
    : tied_(&tied_to) {
  vocab_size_ = tied_to.vocab_size();
  vocab_start_ = tied_to.vocab_start();
  comm_ = &comm;
}

void ParallelLMHead::forward_shard(const TensorView& shard_logits, const TensorView& hidden,
                                   const ExecContext& ctx) const {
  CHECK_EQ(shard_logits.size(1), head_weight().size(0));
  const PhaseScope phase(ctx, Phase::kGemm);
  kernels::linear(shard_logits, hidden, head_weight(), TensorView(), ctx);
}

void ParallelLMHead::forward(const TensorView& logits, const TensorView& hidden,
                             const TensorView& shard_logits, const TensorView& gathered,
                             const ExecContext& ctx) const {
  const TensorView& w = head_weight();
  const int64_t rows = hidden.size(0), shard = w.size(0);
  if (comm_->world_size() == 1) {
    CHECK_EQ(logits.size(1), vocab_size_);
    // Padding rows exist only with several ranks, so the shard is the whole vocabulary.
    const PhaseScope phase(ctx, Phase::kGemm);
    kernels::linear(logits, hidden, w, TensorView(), ctx);
    return;
  }
  {
    const PhaseScope phase(ctx, Phase::kGemm);
    kernels::linear(shard_logits, hidden, w, TensorView(), ctx);
  }
  // The gather and the copy of each rank's columns into place.
  const PhaseScope phase(ctx, Phase::kLogitsGather);
  comm_->gather_to_root(shard_logits, gathered, ctx);
  if (comm_->rank() != 0) return;
  // gathered [tp, S, shard] -> logits [S, V]: rank r's columns go to [r * shard, ...),
  // dropping the padding columns past V.
  const size_t elem = sizeof(float);
  for (int r = 0; r < comm_->world_size(); ++r) {
    const int64_t begin = r * shard;
    const int64_t cols = std::min<int64_t>(shard, vocab_size_ - begin);
    if (cols <= 0) continue;
    const char* src = static_cast<const char*>(gathered.data) + r * rows * shard * elem;
    char* dst = static_cast<char*>(logits.data) + begin * elem;
    const size_t dst_pitch = static_cast<size_t>(logits.stride[0]) * elem;
    if (logits.on_cpu()) {
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(dst + i * dst_pitch, src + i * shard * elem, cols * elem);
    } else {
      CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, shard * elem, cols * elem, rows,
                                   cudaMemcpyDeviceToDevice, ctx.stream));
    }
  }
}

}  // namespace nanovllm
