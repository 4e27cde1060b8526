// ModelRunner with tensor parallelism simulated in-process (ranks as threads): tp 2 and 4
// reproduce tp 1's logits within bf16 tolerance and its greedy tokens; decode agrees with a
// fresh prefill of the same tokens.
#include "rank/model_runner.h"

#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <map>
#include <memory>

#include "engine/sampling_slots.h"
#include "engine/step_builder.h"
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
Trace generate(const test::TempModel& m, int tp, const std::vector<std::vector<int32_t>>& prompts,
               int decode_steps) {
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
      owned.push_back(
          std::make_unique<Sequence>(static_cast<int64_t>(i), prompts[i], p, kBlockSize));
      for (int b = 0; b < 8; ++b)
        owned.back()->block_table.push_back(static_cast<int32_t>(8 * i + b));
      seqs.push_back(owned.back().get());
    }
    for (int step = 0; step <= decode_steps; ++step) {
      const StepCommand cmd = step == 0 ? build_prefill_command(seqs, kBlockSize, slots)
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

}  // namespace
}  // namespace nanovllm
