// Vocabulary-parallel embedding and LM head (nano-vllm's layers/embed_head.py). Rank r owns
// vocab rows [r * S, (r + 1) * S) with S = ceil(V / tp_size); rows past V are zero padding.
#pragma once

#include <algorithm>
#include <string>

#include "layers/linear.h"

namespace nanovllm {

class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding(const Checkpoint& ckpt, const std::string& name, int64_t vocab_size,
                         const ShardInfo& shard, Communicator& comm);
  // out: [T, H] bf16; ids: [T] i32. Ids outside the shard give zeros; the all-reduce sums
  // in the owner's row.
  void forward(const TensorView& out, const TensorView& ids, const ExecContext& ctx) const;

  const TensorView& weight() const { return weight_.view(); }  // [S, H] bf16
  int64_t vocab_size() const { return vocab_size_; }
  int64_t shard_rows() const { return weight_.view().size(0); }
  int64_t vocab_start() const { return vocab_start_; }

 protected:
  VocabParallelEmbedding() = default;
  void load(const Checkpoint& ckpt, const std::string& name, int64_t vocab_size,
            const ShardInfo& shard, Communicator& comm);

  Parameter weight_;
  int64_t vocab_size_ = 0, vocab_start_ = 0;
  Communicator* comm_ = nullptr;
};

class ParallelLMHead : public VocabParallelEmbedding {
 public:
  // Untied: loads `name` (lm_head.weight). Tied: tied_to's weight is used, nothing is loaded.
  ParallelLMHead(const Checkpoint& ckpt, const std::string& name, int64_t vocab_size,
                 const ShardInfo& shard, Communicator& comm);
  explicit ParallelLMHead(const VocabParallelEmbedding& tied_to, Communicator& comm);

  // hidden: [S, H] bf16 (the rows that get logits); shard_logits: [S, shard_rows] f32
  // scratch; gathered: [tp_size, S, shard_rows] f32 scratch (rank 0). logits (rank 0 only):
  // [S, V] f32. With one rank, shard_logits may be logits itself (no gather).
  void forward(const TensorView& logits, const TensorView& hidden, const TensorView& shard_logits,
               const TensorView& gathered, const ExecContext& ctx) const;

  // This rank's shard alone, no gather (sampling from shards): shard_logits [S, shard_rows] f32.
  void forward_shard(const TensorView& shard_logits, const TensorView& hidden,
                     const ExecContext& ctx) const;

  int64_t shard_rows() const { return head_weight().size(0); }
  // The shard's columns that are real tokens (the last shard's padding rows are not).
  int64_t vocab_columns() const {
    return std::max<int64_t>(0, std::min(shard_rows(), vocab_size_ - vocab_start_));
  }

 private:
  const TensorView& head_weight() const { return tied_ != nullptr ? tied_->weight() : weight(); }
  const VocabParallelEmbedding* tied_ = nullptr;
};

}  // namespace nanovllm
