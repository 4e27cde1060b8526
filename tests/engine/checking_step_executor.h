// Test-only model for the engine tests, behind the same port as the real one: it sees only the
// StepCommands the engine builds. A fake paged KV cache plus a deterministic "model": each KV
// slot stores its token and a fingerprint of the whole prefix up to it (what real KV depends
// on), computed from the previous position's slot read through the block table, as attention
// reads the cached prefix. So a wrong, stale or torn block table is detected; the sampled
// token is a hash of (the row's seed, fingerprint of the full context), so outputs do not
// depend on batching and a sequential reference (reference_completion) can predict them.
// Sampling parameters are kept per sampling slot, as rank 0's device keeps them: a row's seed
// is its slot's, filled only by new_slot_params, so a missing or stale slot is detected too.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"
#include "engine/step_builder.h"
#include "ipc/step_executor.h"
#include "ipc/step_limits.h"

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

inline int32_t fake_next_token(uint64_t seed, uint64_t context_fingerprint, int vocab_size) {
  return static_cast<int32_t>(mix64(context_fingerprint ^ mix64(seed)) %
                              static_cast<uint64_t>(vocab_size));
}

// What the engine must produce for one completion run alone, sampling with `seed`: the
// obvious generation loop. eos (unless ignore_eos) and stop_token_ids end it once min_tokens
// tokens exist (this model ignores the sampler's mask, so the engine's guard is what holds);
// stop strings are not modelled here.
inline std::vector<int32_t> reference_completion_seeded(uint64_t seed, std::vector<int32_t> tokens,
                                                        const SamplingParams& params,
                                                        const std::vector<int32_t>& eos_ids,
                                                        int max_model_len, int vocab_size) {
  const size_t prompt_len = tokens.size();
  while (true) {
    uint64_t fp = 0;
    for (const int32_t t : tokens) fp = extend_fingerprint(fp, t);
    const int32_t next = fake_next_token(seed, fp, vocab_size);
    tokens.push_back(next);
    const int generated = static_cast<int>(tokens.size() - prompt_len);
    bool stop = false;
    if (generated >= params.min_tokens) {
      for (const int32_t e : eos_ids) stop = stop || (e == next && !params.ignore_eos);
      for (const int32_t e : params.stop_token_ids) stop = stop || e == next;
    }
    if (stop || generated >= params.max_tokens || static_cast<int>(tokens.size()) >= max_model_len)
      break;
  }
  return std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(prompt_len),
                              tokens.end());
}

// The same for a request without a seed (it samples with default_sequence_seed(seq_id)).
inline std::vector<int32_t> reference_completion(int64_t seq_id, std::vector<int32_t> tokens,
                                                 int max_tokens, bool ignore_eos,
                                                 const std::vector<int32_t>& eos_ids,
                                                 int max_model_len, int vocab_size) {
  SamplingParams params;
  params.max_tokens = max_tokens;
  params.ignore_eos = ignore_eos;
  return reference_completion_seeded(default_sequence_seed(seq_id), std::move(tokens), params,
                                     eos_ids, max_model_len, vocab_size);
}

class CheckingStepExecutor : public StepExecutor {
 public:
  explicit CheckingStepExecutor(int vocab_size) : vocab_size_(vocab_size) {}
  // Must be called once the engine (and its block manager) exists.
  void attach(const BlockManager& block_manager) {
    bm_ = &block_manager;
    slots_.assign(static_cast<size_t>(bm_->num_blocks()) * bm_->block_size(), Slot{});
  }
  int num_kv_blocks() const override { return bm_ ? bm_->num_blocks() : 0; }
  // When set, every command must stay inside these limits (what ModelRunner enforces).
  std::optional<StepLimits> limits;
  int64_t num_runs = 0;
  int max_batch_seqs = 0;
  int max_prefill_tokens = 0;
  int64_t num_slot_fills = 0;  // new_slot_params entries over all steps
  // Async scheduling: decode commands may carry pending inputs (kPendingInputToken), each the
  // token this fake last sampled for the row's slot, as rank 0's device resolves them. The
  // fake runs a step at its launch (the device runs it before anything launched later) and
  // the engine collects the results afterwards (StepExecutor's default launch / collect).
  bool accept_pending = false;
  int64_t num_pending_inputs = 0;  // rows that took a pending input
  bool accepts_pending_inputs(int num_seqs) const override {
    (void)num_seqs;
    return accept_pending;
  }
  int32_t max_slot_filled = -1;
  StepKind last_kind = StepKind::kExit;
  std::vector<uint64_t> last_seeds;  // [S] the rows of the last step, by their (unique) seeds

  StepResult execute(const StepCommand& cmd) override {
    if (cmd.kind == StepKind::kExit) return {};
    EXPECT_NE(bm_, nullptr);
    if (limits) {
      EXPECT_EQ(step_limit_violation(cmd, *limits), "") << "step " << num_runs;
    }
    ++num_runs;
    const int b_count = cmd.num_seqs(), t_count = cmd.num_tokens();
    max_batch_seqs = std::max(max_batch_seqs, b_count);
    const bool prefill = cmd.kind == StepKind::kPrefill;
    last_kind = cmd.kind;
    if (prefill) max_prefill_tokens = std::max(max_prefill_tokens, t_count);
    // Every decode row samples; a prefill row samples when its chunk ends its sequence.
    const int s_count = static_cast<int>(cmd.logits_indices.size());
    if (!prefill) {
      EXPECT_EQ(s_count, b_count);
    }
    EXPECT_LE(s_count, b_count);
    EXPECT_EQ(static_cast<int>(cmd.sample_slots.size()), s_count);
    last_seeds = take_sampling_slots(cmd);
    last_seeds.resize(static_cast<size_t>(s_count));  // rows without a slot already failed
    const std::vector<int32_t> input_ids = resolve_pending(cmd);  // [T]
    // Store every new token's KV first (as each layer does before attention), in order, each
    // from its predecessor's slot (within a step the predecessor may be new too).
    std::vector<int> context(static_cast<size_t>(b_count));  // tokens after this step
    for (int b = 0; b < b_count; ++b) {
      const int q_begin = prefill ? cmd.cu_seqlens_q[b] : b;
      const int q_end = prefill ? cmd.cu_seqlens_q[b + 1] : b + 1;
      context[b] = prefill ? cmd.cu_seqlens_k[b + 1] - cmd.cu_seqlens_k[b] : cmd.context_lens[b];
      EXPECT_LT(q_begin, q_end) << "no query token in row " << b;
      EXPECT_EQ(cmd.positions[q_end - 1], context[b] - 1) << "row " << b;
      for (int t = q_begin; t < q_end; ++t) {
        const int p = cmd.positions[t];
        const uint64_t previous = p == 0 ? 0 : read(cmd, b, p - 1).fingerprint;
        const uint64_t fp = extend_fingerprint(previous, input_ids[t]);
        const int32_t block_id = cmd.block_tables[b * cmd.block_table_width + p / bs()];
        EXPECT_EQ(cmd.slot_mapping[t], block_id * bs() + p % bs()) << "token " << t;
        Slot& slot = slots_[static_cast<size_t>(cmd.slot_mapping[t])];
        const Block& block = bm_->block(block_id);
        // A block other sequences read must never change under them.
        if (block.ref_count > 1 && slot.generation == block.generation) {
          EXPECT_EQ(slot.fingerprint, fp) << "shared block " << block_id << " rewritten";
        }
        slot = Slot{block.generation, input_ids[t], fp};
      }
    }
    // Then "attend": every position of the context must read back a consistent prefix chain.
    std::vector<uint64_t> context_fp(static_cast<size_t>(b_count));  // [B]
    for (int b = 0; b < b_count; ++b) {
      uint64_t fp = 0;
      for (int p = 0; p < context[b]; ++p) {
        const Slot& slot = read(cmd, b, p);
        fp = extend_fingerprint(fp, slot.token);
        EXPECT_EQ(slot.fingerprint, fp) << "row " << b << " reads wrong KV at position " << p;
      }
      context_fp[static_cast<size_t>(b)] = fp;
    }
    // Sampled rows: the batch row whose last token each logits row is.
    StepResult result;
    for (int i = 0; i < s_count; ++i) {
      const int t = cmd.logits_indices[i];
      int b = 0;
      if (prefill) {
        while (b < b_count && cmd.cu_seqlens_q[b + 1] <= t) ++b;
        EXPECT_EQ(cmd.cu_seqlens_q[b + 1] - 1, t) << "logits row " << i << " is not a row's last";
      } else {
        b = t;
      }
      result.sampled_token_ids.push_back(
          fake_next_token(last_seeds[i], context_fp[static_cast<size_t>(b)], vocab_size_));
      if (i < static_cast<int>(cmd.sample_slots.size()))
        last_tokens_[cmd.sample_slots[i]] = result.sampled_token_ids.back();
    }
    if (cmd.sample_logprobs) {
      std::vector<int32_t> positions;  // [S] position of each sampled token
      for (const int32_t t : cmd.logits_indices) positions.push_back(cmd.positions[t] + 1);
      result.sampled_logprobs = fake_logprob_rows(result.sampled_token_ids, positions);
    }
    EXPECT_EQ(cmd.prompt_logprobs_targets.size(), cmd.prompt_logprobs_indices.size());
    std::vector<int32_t> prompt_positions;  // [P] position of each row's target token
    for (const int32_t t : cmd.prompt_logprobs_indices) {
      EXPECT_TRUE(prefill) << "prompt_logprobs rows in a decode step";
      prompt_positions.push_back(cmd.positions[t] + 1);
    }
    result.prompt_logprobs = fake_logprob_rows(cmd.prompt_logprobs_targets, prompt_positions);
    return result;
  }

  // The fake logprobs: a token's logprob is -token / 8, its rank the position it lands at + 1
  // (so a row given to the wrong position or token shows), alternative j is (token + j, -j).
  static float fake_logprob(int32_t token) { return -static_cast<float>(token) / 8.0f; }
  static int32_t fake_rank(int32_t position) { return position + 1; }
  static LogprobRows fake_logprob_rows(const std::vector<int32_t>& tokens,
                                       const std::vector<int32_t>& positions) {
    LogprobRows rows;
    rows.width = kMaxSlotLogprobs;
    for (size_t i = 0; i < tokens.size(); ++i) {
      rows.logprob.push_back(fake_logprob(tokens[i]));
      rows.rank.push_back(fake_rank(positions[i]));
      for (int j = 0; j < rows.width; ++j) {
        rows.top_ids.push_back(tokens[i] + j);
        rows.top_logprobs.push_back(-static_cast<float>(j));
      }
    }
    return rows;
  }

 private:
  // The command's input ids with each pending one replaced by its slot's last sampled token.
  std::vector<int32_t> resolve_pending(const StepCommand& cmd) {
    std::vector<int32_t> ids = cmd.input_ids;
    for (size_t t = 0; t < ids.size(); ++t) {
      if (ids[t] != kPendingInputToken) continue;
      ++num_pending_inputs;
      EXPECT_TRUE(accept_pending) << "a pending input sent to an executor that refuses them";
      EXPECT_EQ(cmd.kind, StepKind::kDecode) << "a pending input in a prefill command";
      const auto it =
          t < cmd.sample_slots.size() ? last_tokens_.find(cmd.sample_slots[t]) : last_tokens_.end();
      if (it == last_tokens_.end()) {
        ADD_FAILURE() << "pending input of row " << t << " has no token in its slot";
        continue;
      }
      ids[t] = it->second;
    }
    return ids;
  }

  // What the device keeps for one sampling slot.
  struct SamplingSlot {
    uint64_t seed = 0;
    int next_position = -1;  // the token number its next decode row samples
  };

  // Fills slots from new_slot_params, then checks each sampled row against its slot: a row
  // whose slot was not (re)filled in this very step must have been filled before and still be
  // its own (it samples the token right after the one the slot last sampled; a slot refilled
  // under a running sequence breaks that). Returns each row's seed, [S].
  std::vector<uint64_t> take_sampling_slots(const StepCommand& cmd) {
    std::set<int32_t> filled;  // slots (re)filled by this command
    for (const SlotSamplingParams& p : cmd.new_slot_params) {
      EXPECT_EQ(cmd.kind, StepKind::kPrefill) << "slot " << p.slot << " filled outside a prefill";
      EXPECT_GE(p.slot, 0);
      EXPECT_TRUE(filled.insert(p.slot).second) << "slot " << p.slot << " filled twice";
      sampling_slots_[p.slot] = SamplingSlot{p.seed, -1};
      ++num_slot_fills;
      max_slot_filled = std::max(max_slot_filled, p.slot);
    }
    std::vector<uint64_t> seeds;  // [S]
    std::set<int32_t> used;       // slots sampled by this command
    for (size_t i = 0; i < cmd.sample_slots.size() && i < cmd.logits_indices.size(); ++i) {
      const int32_t slot = cmd.sample_slots[i];
      // The token this row samples: the one after its last input token.
      const int position = cmd.positions[cmd.logits_indices[i]] + 1;
      EXPECT_TRUE(used.insert(slot).second) << "slot " << slot << " sampled by two rows";
      const auto it = sampling_slots_.find(slot);
      if (it == sampling_slots_.end()) {
        ADD_FAILURE() << "row " << i << " samples from slot " << slot << ", never filled";
        seeds.push_back(0);
        continue;
      }
      // A slot filled in this step starts its sequence's sampling; any other row (a decode
      // row, in a decode or a mixed prefill command) continues it.
      if (!filled.count(slot)) {
        EXPECT_EQ(position, it->second.next_position)
            << "row " << i << " samples from slot " << slot
            << ", last filled or used by another sequence";
      }
      it->second.next_position = position + 1;
      seeds.push_back(it->second.seed);
    }
    return seeds;
  }

  struct Slot {
    uint64_t generation = ~0ull;  // Block::generation when written; other = garbage
    int32_t token = -1;
    uint64_t fingerprint = 0;
  };
  int bs() const { return bm_->block_size(); }
  // The slot of position p of row b, through the block table; a stale block reads garbage.
  Slot read(const StepCommand& cmd, int b, int p) const {
    const int32_t block_id = cmd.block_tables[b * cmd.block_table_width + p / bs()];
    EXPECT_GE(block_id, 0) << "row " << b << " has no block for position " << p;
    if (block_id < 0) return Slot{};
    const Slot& slot = slots_[static_cast<size_t>(block_id) * bs() + p % bs()];
    const bool valid = slot.generation == bm_->block(block_id).generation;
    EXPECT_TRUE(valid) << "row " << b << " reads a stale block " << block_id << " at " << p;
    return valid ? slot : Slot{};
  }

  int vocab_size_;
  const BlockManager* bm_ = nullptr;
  std::vector<Slot> slots_;                                   // [num_blocks * block_size]
  std::unordered_map<int32_t, SamplingSlot> sampling_slots_;  // by slot id, once filled
  std::unordered_map<int32_t, int32_t> last_tokens_;          // slot -> its last sampled token
};

}  // namespace nanovllm::testing
