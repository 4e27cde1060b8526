// End-to-end generation on the random-weight tiny model: LLMEngine + Scheduler +
// BlockManager driving a ModelRunner (the --tp 1 path) on the CPU backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "engine/llm_engine.h"
#include "rank/model_runner.h"
#include "tests/layers/model_test_util.h"

namespace nanovllm {
namespace {

constexpr int kBlockSize = 16;

const test::TempModel& tiny() {
  static const auto model = std::make_unique<test::TempModel>("tiny");
  return *model;
}

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

struct RunResult {
  std::vector<std::vector<int32_t>> completions;  // in request order
  EngineStats stats;
};

// The step's shape and the cache: the defaults run every prompt whole; a small budget and
// threshold chunk them into steps mixed with the running decodes (decodes first).
struct StepShape {
  int budget = 512, long_prefill_threshold = 4096;
  DType kv_dtype = DType::kBf16;
};

RunResult run_engine(const std::vector<Request>& requests, int num_blocks,
                     BlockHashFn hash_fn = compute_block_hash, StepShape shape = {}) {
  SingleRankCommunicator comm;
  ModelRunnerOptions options{
      .block_size = kBlockSize, .num_kv_blocks = num_blocks, .cpu_threads = 2};
  options.kv_cache_dtype = shape.kv_dtype;
  ModelRunner runner(tiny().dir(), tiny().config(), comm, options);
  EngineConfig config;
  config.kvcache_block_size = kBlockSize;
  config.num_kvcache_blocks = num_blocks;
  config.max_model_len = 256;
  config.max_num_batched_tokens = shape.budget;
  config.long_prefill_token_threshold = shape.long_prefill_threshold;
  config.max_num_seqs = std::min(config.max_num_seqs, shape.budget);
  config.eos_token_ids = tiny().config().eos_token_ids;
  LLMEngine engine(config, runner, std::move(hash_fn));
  std::map<int64_t, size_t> order;
  for (size_t i = 0; i < requests.size(); ++i) {
    const AddRequestResult r = engine.add_request(requests[i].prompt, requests[i].params);
    EXPECT_TRUE(r.ok()) << r.error;
    order[*r.seq_id] = i;
  }
  RunResult result;
  result.completions.resize(requests.size());
  for (int steps = 0; !engine.is_finished() && steps < 10000; ++steps)
    for (const RequestOutput& out : engine.step())
      result.completions[order.at(out.seq_id)] = out.completion_token_ids;
  EXPECT_TRUE(engine.is_finished());
  result.stats = engine.stats();
  return result;
}

// Prompts sharing a 40-token prefix (two full blocks and a half), then each its own tail.
std::vector<Request> shared_prefix_requests(int max_tokens) {
  std::vector<int32_t> prefix;
  for (int i = 0; i < 40; ++i) prefix.push_back(1000 + 37 * i);
  std::vector<Request> requests;
  for (int r = 0; r < 4; ++r) {
    Request req{prefix, greedy(max_tokens)};
    for (int i = 0; i <= r * 3; ++i) req.prompt.push_back(50000 + 101 * r + i);
    requests.push_back(req);
  }
  return requests;
}

// A hash that never repeats: no block is ever found in the cache (prefix caching off).
BlockHashFn no_prefix_cache() {
  auto counter = std::make_shared<uint64_t>(0);
  return [counter](std::optional<uint64_t>, std::span<const int32_t>) { return ++*counter; };
}

TEST(EngineGeneration, GreedyTokensEqualArgmaxOfFreshPrefillOfEveryPrefix) {
  const std::vector<Request> requests{
      {{9707, 11, 1879, 0, 42}, greedy(6)},
      {{7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 3}, greedy(6)}};
  const RunResult run = run_engine(requests, 64);
  // Independent path: every next token from a one-shot prefill of all tokens so far,
  // in a fresh engine (no decode kernel, no cache reuse across steps).
  for (size_t r = 0; r < requests.size(); ++r) {
    ASSERT_EQ(run.completions[r].size(), 6u);
    std::vector<int32_t> tokens = requests[r].prompt;
    for (int32_t expected : run.completions[r]) {
      const RunResult one = run_engine({{tokens, greedy(1)}}, 64);
      EXPECT_EQ(one.completions[0], std::vector<int32_t>{expected});
      tokens.push_back(expected);
    }
  }
}

TEST(EngineGeneration, PrefixCachingOnAndOffGiveIdenticalTokens) {
  const auto requests = shared_prefix_requests(5);
  // The later requests find the first one's full prefix blocks in the cache.
  const RunResult on = run_engine(requests, 64);
  const RunResult off = run_engine(requests, 64, no_prefix_cache());
  EXPECT_EQ(on.completions, off.completions);
  EXPECT_GT(on.stats.num_cached_tokens, 0);
  EXPECT_EQ(off.stats.num_cached_tokens, 0);
}

TEST(EngineGeneration, PreemptionUnderTinyKvCacheGivesSameTokensAsRoomyCache) {
  std::vector<Request> requests;
  for (int r = 0; r < 4; ++r) {
    Request req{{}, greedy(24)};
    for (int i = 0; i < 14; ++i) req.prompt.push_back(300 + 1000 * r + 13 * i);
    requests.push_back(req);
  }
  const RunResult roomy = run_engine(requests, 64);
  const RunResult tight = run_engine(requests, 6);  // 96 slots for 4 x 38 tokens
  EXPECT_EQ(tight.completions, roomy.completions);
  EXPECT_GT(tight.stats.num_preemptions, 0);
  EXPECT_EQ(roomy.stats.num_preemptions, 0);
}

// --kv-cache-dtype fp8: a mixed step's leading one-query rows (the running decodes) go
// through the decode kernel and the chunks through the prefill kernel, over slices of the
// step's q, block table and cu_seqlens (rank/prefill_attention_split.h). On the CPU both
// kernels compute one query exactly alike, so chunked mixed steps must reproduce whole
// prompts token for token: a misplaced slice reads another sequence's keys. int8 (no split)
// the same way.
TEST(EngineGeneration, QuantizedCacheMixedChunkedStepsGiveTheSameTokensAsWholePrompts) {
  std::vector<Request> requests;
  for (int r = 0; r < 4; ++r) {
    Request req{{}, greedy(12)};
    for (int i = 0; i < 20 + 9 * r; ++i) req.prompt.push_back(700 + 997 * r + 31 * i);
    requests.push_back(req);
  }
  for (const DType dt : {DType::kFp8E4M3, DType::kI8}) {
    SCOPED_TRACE(dtype_name(dt));
    const RunResult whole = run_engine(requests, 64, compute_block_hash, {.kv_dtype = dt});
    const RunResult mixed = run_engine(requests, 64, compute_block_hash,
                                       {.budget = 24, .long_prefill_threshold = 8, .kv_dtype = dt});
    EXPECT_EQ(mixed.completions, whole.completions);
    EXPECT_GT(mixed.stats.num_prefill_steps, whole.stats.num_prefill_steps + 4);
  }
}

// --kv-cache-dtype int8: a cached prefix is read back as stored, so prefix caching on and off
// give the same tokens, and so does a preempted and recomputed sequence.
TEST(EngineGeneration, Int8CachePrefixCachingAndPreemptionKeepTheTokens) {
  const StepShape int8{.kv_dtype = DType::kI8};
  const auto shared = shared_prefix_requests(5);
  const RunResult on = run_engine(shared, 64, compute_block_hash, int8);
  const RunResult off = run_engine(shared, 64, no_prefix_cache(), int8);
  EXPECT_EQ(on.completions, off.completions);
  EXPECT_GT(on.stats.num_cached_tokens, 0);
  std::vector<Request> requests;
  for (int r = 0; r < 4; ++r) {
    Request req{{}, greedy(24)};
    for (int i = 0; i < 14; ++i) req.prompt.push_back(300 + 1000 * r + 13 * i);
    requests.push_back(req);
  }
  const RunResult roomy = run_engine(requests, 64, compute_block_hash, int8);
  const RunResult tight = run_engine(requests, 6, compute_block_hash, int8);
  EXPECT_EQ(tight.completions, roomy.completions);
  EXPECT_GT(tight.stats.num_preemptions, 0);
}

TEST(EngineGeneration, SeededSamplingDoesNotDependOnBatchComposition) {
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.max_tokens = 6;
  p.ignore_eos = true;
  p.seed = 1234;
  const Request target{{5, 6, 7, 8, 9}, p};
  SamplingParams other = p;
  other.seed = 99;
  const RunResult alone = run_engine({target}, 64);
  const RunResult crowd = run_engine({{{1, 2, 3}, other}, target, {{4, 4, 4, 4}, other}}, 64);
  EXPECT_EQ(alone.completions[0], crowd.completions[1]);
  ASSERT_EQ(alone.completions[0].size(), 6u);
}

}  // namespace
}  // namespace nanovllm
