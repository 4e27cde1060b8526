// The CUDA warm-up's step command (rank/kv_cache_sizing.h) for a grid of engine limits: it must
// stay inside every limit ModelRunner enforces on a command (ipc/step_limits.h), so a start-up
// such as --max-num-seqs 1 with the default budget (16384 tokens, 4 sequences of 4096 before)
// never trips the executor, and it must still be the costliest step the scheduler can send.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "ipc/step_limits.h"
#include "rank/kv_cache_sizing.h"

namespace nanovllm {
namespace {

struct GridPoint {
  int max_num_seqs, max_num_batched_tokens, max_model_len, block_size;
  std::string name() const {
    return "max_num_seqs " + std::to_string(max_num_seqs) + ", budget " +
           std::to_string(max_num_batched_tokens) + ", max_model_len " +
           std::to_string(max_model_len) + ", block " + std::to_string(block_size);
  }
};

StepCommand warmup_command(const GridPoint& g) {
  const WarmupShape shape = warmup_shape(g.max_num_batched_tokens, g.max_num_seqs, g.max_model_len);
  const int width = (g.max_model_len + g.block_size - 1) / g.block_size;
  return warmup_step_command(shape, width, g.max_num_seqs);
}

// 1..8 sequences x budgets below, at and above max_model_len (and below max_num_seqs, which
// the launcher refuses but the engine's arithmetic must survive) x three model lengths.
std::vector<GridPoint> grid() {
  std::vector<GridPoint> points;
  for (int seqs = 1; seqs <= 8; ++seqs)
    for (const int len : {100, 256, 4096})
      for (const int budget : {1, seqs, len / 2, len - 1, len, len + 1, 3 * len, 16384, 65536})
        for (const int block : {16, 256}) points.push_back({seqs, budget, len, block});
  return points;
}

TEST(WarmupStep, StaysInsideEveryLimitTheExecutorEnforces) {
  for (const GridPoint& g : grid()) {
    const StepLimits limits{g.max_num_batched_tokens, g.max_num_seqs, g.max_model_len,
                            g.block_size};
    const StepCommand cmd = warmup_command(g);
    EXPECT_EQ(step_limit_violation(cmd, limits), "") << g.name();
    EXPECT_LE(cmd.num_seqs(), g.max_num_seqs) << g.name();
    EXPECT_LE(static_cast<int>(cmd.new_slot_params.size()), g.max_num_seqs) << g.name();
  }
}

TEST(WarmupStep, IsTheCostliestStepTheLimitsAllow) {
  for (const GridPoint& g : grid()) {
    const StepLimits limits{g.max_num_batched_tokens, g.max_num_seqs, g.max_model_len,
                            g.block_size};
    const StepCommand cmd = warmup_command(g);
    // As many new tokens as any step may carry, every context at max_model_len.
    EXPECT_EQ(cmd.num_tokens(), max_step_tokens(limits)) << g.name();
    for (int s = 0; s < cmd.num_seqs(); ++s)
      EXPECT_EQ(cmd.cu_seqlens_k[s + 1] - cmd.cu_seqlens_k[s], g.max_model_len) << g.name();
    // Every sampling slot sampled once, with its parameters set this step: the logits and the
    // sampler's buffers reach their full size.
    EXPECT_EQ(static_cast<int>(cmd.logits_indices.size()), g.max_num_seqs) << g.name();
    const std::set<int32_t> slots(cmd.sample_slots.begin(), cmd.sample_slots.end());
    EXPECT_EQ(static_cast<int>(slots.size()), g.max_num_seqs) << g.name();
    EXPECT_EQ(static_cast<int>(cmd.new_slot_params.size()), g.max_num_seqs) << g.name();
  }
}

TEST(WarmupStep, OneSequenceWithTheDefaultBudgetIsOneFullSequence) {
  // The start-up that died: --max-num-seqs 1 with the default 16384-token budget.
  const GridPoint g{1, 16384, 4096, 256};
  const StepCommand cmd = warmup_command(g);
  EXPECT_EQ(cmd.num_seqs(), 1);
  EXPECT_EQ(cmd.num_tokens(), 4096);
  EXPECT_EQ(cmd.sample_slots, (std::vector<int32_t>{0}));
}

}  // namespace
}  // namespace nanovllm
