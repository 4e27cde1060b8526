// ModelRunner with tensor parallelism simulated in-process (ranks as threads): tp 2 and 4
// reproduce tp 1's logits within bf16 tolerance and its greedy tokens; decode agrees with a
// fresh prefill of the same tokens. Rank 0's per-slot sampling state: the min_tokens mask
// reaches the sampler through it.
#include "rank/model_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "engine/sampling_slots.h"
#include "engine/step_builder.h"
#include "rank/kv_cache_sizing.h"
#include "tests/layers/model_test_util.h"

namespace nanovllm {
namespace {

constexpr int kBlockSize = 16;
constexpr int kBlocks = 32;

std::unique_ptr<test::TempModel>& shared_model(const std::string& preset) {
  static std::map<std::string, std::unique_ptr<test::TempModel>> models;
  auto& m = models[preset];
  if (!m) m = std::make_unique<test::TempModel>(preset);
  return m;
}

struct Trace {
  std::vector<std::vector<float>> logits;  // per step: [S * V]
  std::vector<std::vector<int32_t>> tokens;
};

// Prefill of the prompts, then `decode_steps` greedy decode steps, on `tp` ranks; rank 0's
// logits and tokens. Block tables are laid out by hand (sequence i owns blocks from 8 * i).
// `tweak` may change sequence i's sampling parameters; `eos` are the engine's eos ids.
Trace generate(const test::TempModel& m, int tp, const std::vector<std::vector<int32_t>>& prompts,
               int decode_steps,
               const std::function<void(size_t, SamplingParams&)>& tweak = nullptr,
               std::span<const int32_t> eos = {}) {
  Trace trace;
  std::barrier<> sync(tp);
  test::run_ranks(tp, [&](int rank, Communicator& comm) {
    ModelRunner runner(
        m.dir(), m.config(), comm,
        ModelRunnerOptions{.block_size = kBlockSize, .num_kv_blocks = kBlocks, .cpu_threads = 1});
    std::vector<std::unique_ptr<Sequence>> owned;
    std::vector<Sequence*> seqs;
    SamplingSlots slots(static_cast<int>(prompts.size()));
    for (size_t i = 0; i < prompts.size(); ++i) {
      SamplingParams p;
      p.temperature = 0.0f;
      p.seed = i;
      if (tweak) tweak(i, p);
      owned.push_back(
          std::make_unique<Sequence>(static_cast<int64_t>(i), prompts[i], p, kBlockSize));
      for (int b = 0; b < 8; ++b)
        owned.back()->block_table.push_back(static_cast<int32_t>(8 * i + b));
      seqs.push_back(owned.back().get());
    }
    for (int step = 0; step <= decode_steps; ++step) {
      const StepCommand cmd = step == 0 ? build_prefill_command(seqs, kBlockSize, slots, eos)
                                        : build_decode_command(seqs, kBlockSize);
      const TensorView logits = runner.run_model(cmd);
      if (rank == 0) {
        const float* l = static_cast<const float*>(logits.data);
        trace.logits.emplace_back(l, l + logits.numel());
        trace.tokens.push_back(runner.sample(cmd, logits));
      }
      sync.arrive_and_wait();  // rank 0's tokens reach every rank (the broadcast's job)
      for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->append_token(trace.tokens.back()[i]);
      sync.arrive_and_wait();
    }
  });
  return trace;
}

double rms_of(const std::vector<float>& v) {
  double ss = 0.0;
  for (float x : v) ss += double{x} * x;
  return std::sqrt(ss / v.size());
}

void expect_same_run(const Trace& a, const Trace& b) {
  ASSERT_EQ(a.tokens.size(), b.tokens.size());
  for (size_t step = 0; step < a.tokens.size(); ++step) {
    EXPECT_EQ(a.tokens[step], b.tokens[step]) << "step " << step;
    const double rms = rms_of(a.logits[step]);
    double max_err = 0.0;
    for (size_t i = 0; i < a.logits[step].size(); ++i)
      max_err = std::max(max_err, double{std::abs(a.logits[step][i] - b.logits[step][i])});
    EXPECT_LT(max_err, 0.1 * rms) << "step " << step;
  }
}

const std::vector<std::vector<int32_t>> kPrompts = {
    {9707, 11, 1879, 0, 151643, 42, 42, 42, 100, 7, 3, 25, 17, 99999, 5, 6, 77, 8, 9, 10},
    {1, 2, 3},
    {151935, 0, 151935}};

TEST(ModelRunner, TensorParallelTwoRanksReproducesOneRankLogitsAndGreedyTokens) {
  const auto& m = *shared_model("tiny");
  expect_same_run(generate(m, 1, kPrompts, 3), generate(m, 2, kPrompts, 3));
}

TEST(ModelRunner, FourRanksWithReplicatedKvHeadsReproduceOneRank) {
  // tiny-128 has 2 kv heads: with 4 ranks each kv head lives on two ranks.
  const auto& m = *shared_model("tiny-128");
  expect_same_run(generate(m, 1, kPrompts, 2), generate(m, 4, kPrompts, 2));
}

TEST(ModelRunner, DecodeLogitsMatchAFreshPrefillOfTheSameTokens) {
  const auto& m = *shared_model("tiny");
  const Trace run = generate(m, 1, kPrompts, 2);
  // Prefill prompts + the two generated tokens from scratch: the last row of each sequence
  // must equal decode step 2's logits (same math, different kernels and cache reads).
  std::vector<std::vector<int32_t>> extended = kPrompts;
  for (size_t i = 0; i < extended.size(); ++i) {
    extended[i].push_back(run.tokens[0][i]);
    extended[i].push_back(run.tokens[1][i]);
  }
  const Trace fresh = generate(m, 1, extended, 0);
  const double rms = rms_of(run.logits[2]);
  double max_err = 0.0;
  for (size_t i = 0; i < fresh.logits[0].size(); ++i)
    max_err = std::max(max_err, double{std::abs(fresh.logits[0][i] - run.logits[2][i])});
  EXPECT_LT(max_err, 1e-3 * rms);
  EXPECT_EQ(fresh.tokens[0], run.tokens[2]);
}

TEST(ModelRunner, MinTokensMaskReachesTheSamplerThroughTheSlotState) {
  // Each sequence stops on its own free greedy first token (a stop id) and on an eos id, with
  // min_tokens 2: its first two tokens are the argmax over everything else, the third the
  // plain argmax again (the mask ends at prompt + 2).
  const auto& m = *shared_model("tiny");
  const Trace free_run = generate(m, 1, kPrompts, 0);
  const int32_t eos[] = {151643};
  const Trace run = generate(
      m, 1, kPrompts, 3,
      [&](size_t i, SamplingParams& p) {
        p.min_tokens = 2;
        p.stop_token_ids = {free_run.tokens[0][i]};
      },
      eos);
  const size_t n = kPrompts.size();
  for (size_t step = 0; step < run.tokens.size(); ++step) {
    const size_t vocab = run.logits[step].size() / n;
    for (size_t i = 0; i < n; ++i) {
      const float* l = run.logits[step].data() + i * vocab;
      const std::set<int32_t> masked =
          step < 2 ? std::set<int32_t>{free_run.tokens[0][i], eos[0]} : std::set<int32_t>{};
      int32_t want = -1;
      for (int32_t v = 0; v < static_cast<int32_t>(vocab); ++v)
        if (!masked.contains(v) && (want < 0 || l[v] > l[want])) want = v;
      EXPECT_EQ(run.tokens[step][i], want) << "step " << step << " seq " << i;
    }
  }
  for (size_t i = 0; i < n; ++i) EXPECT_NE(run.tokens[0][i], free_run.tokens[0][i]) << "seq " << i;
}

TEST(ModelRunner, WarmupChunkAfterALongCachedPrefixRunsOverTheOneBlockPlaceholder) {
  // The CUDA warm-up's step (rank/kv_cache_sizing.h) through the CPU runner: a budget of 40
  // tokens below max_model_len 64, so one chunk of 40 whose context (cached prefix 24 + 40)
  // is max_model_len, every block-table entry 0 of a one-block cache, nothing stored. The
  // runner and the attention kernels take the shape; every row gets finite logits and a token.
  const auto& m = *shared_model("tiny");
  const int max_model_len = 64, max_num_seqs = 3;
  const WarmupShape shape = warmup_shape(40, max_num_seqs, max_model_len);
  ASSERT_EQ(shape.tokens, 40);
  const StepCommand cmd =
      warmup_step_command(shape, (max_model_len + kBlockSize - 1) / kBlockSize, max_num_seqs);
  ASSERT_EQ(cmd.num_seqs(), 1);
  ASSERT_EQ(cmd.cu_seqlens_k.back(), max_model_len);
  test::run_ranks(1, [&](int, Communicator& comm) {
    ModelRunner runner(m.dir(), m.config(), comm,
                       ModelRunnerOptions{.block_size = kBlockSize,
                                          .num_kv_blocks = 1,
                                          .max_num_batched_tokens = 40,
                                          .max_num_seqs = max_num_seqs,
                                          .max_model_len = max_model_len,
                                          .cpu_threads = 1});
    const TensorView logits = runner.run_model(cmd);
    ASSERT_EQ(logits.size(0), shape.rows);
    const float* l = static_cast<const float*>(logits.data);
    for (int64_t i = 0; i < logits.numel(); ++i) ASSERT_TRUE(std::isfinite(l[i])) << i;
    for (const int32_t token : runner.sample(cmd, logits)) {
      EXPECT_GE(token, 0);
      EXPECT_LT(token, m.config().vocab_size);
    }
  });
}

}  // namespace
}  // namespace nanovllm
