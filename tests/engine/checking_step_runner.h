// Test-only model for the engine tests: a fake paged KV cache plus a deterministic "model".
// Each KV slot stores a fingerprint of the whole prefix up to its token (what real KV
// depends on), so reading a wrong or stale block is detected; the sampled token is a hash
// of (seq id, fingerprint of the full context), so outputs do not depend on batching and a
// sequential reference (reference_completion) can predict them.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "engine/step_runner.h"

namespace nanovllm::testing {

inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Fingerprint of tokens [0, p] from the fingerprint of [0, p - 1].
inline uint64_t extend_fingerprint(uint64_t previous, int32_t token) {
  return mix64(previous ^ mix64(static_cast<uint64_t>(static_cast<uint32_t>(token)) + 1));
}

inline int32_t fake_next_token(int64_t seq_id, uint64_t context_fingerprint, int vocab_size) {
  return static_cast<int32_t>(mix64(context_fingerprint ^ mix64(static_cast<uint64_t>(seq_id))) %
                              static_cast<uint64_t>(vocab_size));
}

// What the engine must produce for one request run alone: the obvious generation loop.
inline std::vector<int32_t> reference_completion(int64_t seq_id, std::vector<int32_t> tokens,
                                                 int max_tokens, bool ignore_eos,
                                                 const std::vector<int32_t>& eos_ids,
                                                 int max_model_len, int vocab_size) {
  const size_t prompt_len = tokens.size();
  while (true) {
    uint64_t fp = 0;
    for (const int32_t t : tokens) fp = extend_fingerprint(fp, t);
    const int32_t next = fake_next_token(seq_id, fp, vocab_size);
    tokens.push_back(next);
    bool eos = false;
    for (const int32_t e : eos_ids) eos = eos || e == next;
    if ((eos && !ignore_eos) || static_cast<int>(tokens.size() - prompt_len) >= max_tokens ||
        static_cast<int>(tokens.size()) >= max_model_len)
      break;
  }
  return std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(prompt_len),
                              tokens.end());
}

class CheckingStepRunner : public StepRunner {
 public:
  explicit CheckingStepRunner(int vocab_size) : vocab_size_(vocab_size) {}
  // Must be called once the engine (and its block manager) exists.
  void attach(const BlockManager& block_manager) {
    bm_ = &block_manager;
    slots_.assign(static_cast<size_t>(bm_->num_blocks()) * bm_->block_size(), Slot{});
  }
  int64_t num_runs = 0;
  int max_batch_seqs = 0;
  int max_prefill_tokens = 0;

  std::vector<int32_t> run(std::span<Sequence* const> seqs, bool is_prefill) override {
    EXPECT_NE(bm_, nullptr);
    ++num_runs;
    max_batch_seqs = std::max(max_batch_seqs, static_cast<int>(seqs.size()));
    const int bs = bm_->block_size();
    std::vector<std::vector<uint64_t>> fps(seqs.size());  // [B][num_tokens] prefix fingerprints
    int prefill_tokens = 0;
    // Store every new token's KV first (as each layer does before attention).
    for (size_t i = 0; i < seqs.size(); ++i) {
      const Sequence& seq = *seqs[i];
      EXPECT_EQ(seq.status, SequenceStatus::RUNNING);
      EXPECT_EQ(static_cast<int>(seq.block_table.size()), seq.num_blocks());
      uint64_t fp = 0;
      for (const int32_t t : seq.token_ids) fps[i].push_back(fp = extend_fingerprint(fp, t));
      const int begin = is_prefill ? seq.num_cached_tokens : seq.num_tokens() - 1;
      EXPECT_LT(begin, seq.num_tokens()) << "no query token for seq " << seq.seq_id;
      prefill_tokens += seq.num_tokens() - begin;
      for (int p = begin; p < seq.num_tokens(); ++p) {
        const int32_t block_id = seq.block_table[p / bs];
        Slot& slot = slots_[static_cast<size_t>(block_id) * bs + p % bs];
        const Block& block = bm_->block(block_id);
        const bool valid = slot.generation == block.generation;
        // A block other sequences read must never change under them.
        if (block.ref_count > 1 && valid) {
          EXPECT_EQ(slot.fingerprint, fps[i][p]) << "shared block " << block_id << " rewritten";
        }
        slot = Slot{block.generation, fps[i][p]};
      }
    }
    if (is_prefill) max_prefill_tokens = std::max(max_prefill_tokens, prefill_tokens);
    // Then "attend": every position of the context must read back its own prefix.
    std::vector<int32_t> out;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const Sequence& seq = *seqs[i];
      for (int p = 0; p < seq.num_tokens(); ++p) {
        const int32_t block_id = seq.block_table[p / bs];
        const Slot& slot = slots_[static_cast<size_t>(block_id) * bs + p % bs];
        EXPECT_TRUE(slot.generation == bm_->block(block_id).generation &&
                    slot.fingerprint == fps[i][p])
            << "seq " << seq.seq_id << " reads wrong KV at position " << p;
      }
      out.push_back(fake_next_token(seq.seq_id, fps[i].back(), vocab_size_));
    }
    return out;
  }

 private:
  struct Slot {
    uint64_t generation = ~0ull;  // Block::generation when written; other = garbage
    uint64_t fingerprint = 0;
  };
  int vocab_size_;
  const BlockManager* bm_ = nullptr;
  std::vector<Slot> slots_;  // [num_blocks * block_size]
};

}  // namespace nanovllm::testing
