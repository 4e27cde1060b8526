// Random workloads through LLMEngine with a checking fake model: invariants after every
// step, outputs equal to a sequential reference, nothing leaked at the end. Requests may ask
// for n > 1 completions, stop_token_ids, min_tokens and stop strings (with Qwen3's tokenizer,
// whose ids below 94 are one printable ASCII character each, so the reference can model them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

#include "engine/llm_engine.h"
#include "tests/engine/checking_step_executor.h"
#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm {
namespace {

using testing::CheckingStepExecutor;
using testing::extend_fingerprint;
using testing::fake_next_token;

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams params;
  int arrival_step = 0;
};

struct Workload {
  EngineConfig config;
  int vocab = 0;
  bool force_collisions = false;
  std::vector<Request> requests;
};

int ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// The printable ASCII character Qwen3's token `id` (< 94) stands for.
char token_char(int32_t id) {
  return static_cast<char>('!' + id);
}

// One completion run alone, as the engine must produce it: per token, eos / stop ids once
// min_tokens exist, then a stop string ending in the new character once more than min_tokens
// exist, then the length limits. Returns the tokens and the stop string's index (or -1).
std::pair<std::vector<int32_t>, int> reference_completion(uint64_t seed,
                                                          std::vector<int32_t> tokens,
                                                          const SamplingParams& p,
                                                          const EngineConfig& c, int vocab) {
  const size_t prompt_len = tokens.size();
  std::string text;
  while (true) {
    uint64_t fp = 0;
    for (const int32_t t : tokens) fp = extend_fingerprint(fp, t);
    const int32_t next = fake_next_token(seed, fp, vocab);
    tokens.push_back(next);
    text += token_char(next);
    const int generated = static_cast<int>(tokens.size() - prompt_len);
    const auto result = [&](int stop) {
      return std::make_pair(std::vector<int32_t>(tokens.begin() + prompt_len, tokens.end()), stop);
    };
    if (generated >= p.min_tokens) {
      bool stop = false;
      for (const int32_t e : c.eos_token_ids) stop = stop || (e == next && !p.ignore_eos);
      for (const int32_t e : p.stop_token_ids) stop = stop || e == next;
      if (stop) return result(-1);
    }
    if (generated > p.min_tokens) {
      // The earliest start wins; only matches ending in the new character are new.
      int best = -1;
      size_t best_start = 0;
      for (size_t i = 0; i < p.stop.size(); ++i) {
        if (!text.ends_with(p.stop[i])) continue;
        const size_t start = text.size() - p.stop[i].size();
        if (best < 0 || start < best_start) best = static_cast<int>(i), best_start = start;
      }
      if (best >= 0) return result(best);
    }
    if (generated >= p.max_tokens || static_cast<int>(tokens.size()) >= c.max_model_len)
      return result(-1);
  }
}

Workload make_workload(uint64_t seed, bool with_stop_strings) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Workload w;
  EngineConfig& c = w.config;
  const int block_sizes[] = {1, 2, 3, 4, 8};
  c.kvcache_block_size = block_sizes[uniform(0, 4)];
  c.max_model_len = uniform(8, 64);
  c.max_num_seqs = uniform(1, 8);
  // Chunked prefill (3 in 4 workloads, the default): any budget that holds a decode step,
  // a long-prefill threshold, mixed or alternating steps. Without: a prompt fits a step.
  c.enable_chunked_prefill = uniform(0, 3) != 0;
  if (c.enable_chunked_prefill) {
    c.max_num_batched_tokens = uniform(c.max_num_seqs, c.max_model_len + 16);
    c.long_prefill_token_threshold = uniform(0, 1) ? 0 : uniform(1, 16);
    c.mixed_chunked_steps = uniform(0, 1);
  } else {
    c.max_num_batched_tokens = c.max_model_len + uniform(0, 64);
  }
  c.eos_token_ids = uniform(0, 1) ? std::vector<int32_t>{0} : std::vector<int32_t>{0, 1};
  w.vocab = uniform(8, 40);
  w.force_collisions = uniform(0, 3) == 0;
  const int alphabet = uniform(2, 10);  // small: equal blocks at different positions
  std::vector<std::vector<int32_t>> prefixes(3);
  for (auto& p : prefixes)
    for (int n = uniform(0, 24); n > 0; --n) p.push_back(uniform(0, alphabet - 1));
  const int num_requests = uniform(1, 12);
  int max_need = 1;
  for (int i = 0; i < num_requests; ++i) {
    Request r;
    r.prompt = prefixes[uniform(0, 2)];
    for (int n = uniform(0, 16); n > 0; --n) r.prompt.push_back(uniform(0, alphabet - 1));
    if (r.prompt.empty() && uniform(0, 1)) r.prompt.push_back(uniform(0, alphabet - 1));
    r.params.max_tokens = uniform(1, 24);
    r.params.ignore_eos = uniform(0, 9) < 3;
    r.arrival_step = uniform(0, 1) ? 0 : uniform(0, 30);
    r.params.n = uniform(0, 3) == 0 ? uniform(2, 4) : 1;
    if (uniform(0, 1)) r.params.seed = static_cast<uint64_t>(uniform(0, 1 << 30));
    for (int n = uniform(0, 3) == 0 ? uniform(1, 2) : 0; n > 0; --n)
      r.params.stop_token_ids.push_back(uniform(0, w.vocab - 1));
    if (uniform(0, 3) == 0) r.params.min_tokens = uniform(0, r.params.max_tokens);
    if (with_stop_strings && uniform(0, 2) == 0) {
      for (int n = uniform(1, 3); n > 0; --n) {
        std::string stop;
        for (int k = uniform(1, 2); k > 0; --k) stop += token_char(uniform(0, w.vocab - 1));
        r.params.stop.push_back(stop);
      }
      r.params.include_stop_str_in_output = uniform(0, 1);
    }
    const int len =
        std::min(static_cast<int>(r.prompt.size()) + r.params.max_tokens, c.max_model_len);
    if (static_cast<int>(r.prompt.size()) <= c.max_model_len)
      max_need = std::max(max_need, ceil_div(len, c.kvcache_block_size));
    w.requests.push_back(std::move(r));
  }
  // Usually just enough for the largest request (forces preemption), sometimes too small.
  c.num_kvcache_blocks =
      uniform(0, 9) == 0 ? std::max(1, max_need - 1) : max_need + uniform(0, max_need / 2);
  return w;
}

bool expect_rejected(const Request& r, const EngineConfig& c) {
  const int p = static_cast<int>(r.prompt.size());
  if (p == 0 || p >= c.max_model_len) return true;  // no room for one generated token
  return ceil_div(std::min(p + r.params.max_tokens, c.max_model_len), c.kvcache_block_size) >
         c.num_kvcache_blocks;
}

void check_invariants(const LLMEngine& engine) {
  const BlockManager& bm = engine.block_manager();
  const Scheduler& sched = engine.scheduler();
  const EngineConfig& c = engine.config();
  ASSERT_EQ(bm.num_free_blocks() + bm.num_used_blocks(), bm.num_blocks());
  std::vector<int> refs(bm.num_blocks(), 0);
  int slots_held = 0;
  ASSERT_LE(static_cast<int>(sched.running().size()), c.max_num_seqs);
  for (const Sequence* seq : sched.running()) {
    ASSERT_EQ(seq->status, SequenceStatus::kRunning);
    ASSERT_LT(seq->num_tokens(), c.max_model_len);
    const int table = static_cast<int>(seq->block_table.size());
    // Blocks for the tokens whose KV is computed, no more (a chunk's, a sampled token's come
    // when a step computes them). With async scheduling, the step in flight counts as computed
    // and the token it samples is pending.
    ASSERT_LE(seq->num_pending_tokens, 1) << "seq " << seq->seq_id;
    ASSERT_LT(seq->num_computed_tokens, seq->num_tokens() + seq->num_pending_tokens)
        << "seq " << seq->seq_id;
    ASSERT_EQ(table, ceil_div(seq->num_computed_tokens, c.kvcache_block_size))
        << "seq " << seq->seq_id << " has " << table << " blocks for " << seq->num_computed_tokens
        << " computed tokens";
    for (const int32_t id : seq->block_table) ++refs.at(id);
    std::vector<int32_t> sorted = seq->block_table;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
    // A running sequence holds its own sampling slot from its first sample on (a prompt
    // still in chunks has none yet; the fake model checks the rest). Short of that last
    // token, it cannot have sampled.
    if (seq->num_computed_tokens < seq->num_tokens() - 1) {
      ASSERT_EQ(seq->sampling_slot, -1) << "prefilling seq " << seq->seq_id << " holds a slot";
    }
    if (!c.enable_chunked_prefill) {
      ASSERT_GE(seq->sampling_slot, 0) << "seq " << seq->seq_id;
    }
    if (seq->sampling_slot >= 0) {
      ASSERT_FALSE(engine.sampling_slots().is_free(seq->sampling_slot)) << "seq " << seq->seq_id;
      ++slots_held;
    }
  }
  ASSERT_EQ(engine.sampling_slots().num_free() + slots_held, c.max_num_seqs);
  for (const Sequence* seq : sched.waiting()) {
    ASSERT_EQ(seq->status, SequenceStatus::kWaiting);
    ASSERT_TRUE(seq->block_table.empty());
    ASSERT_EQ(seq->sampling_slot, -1) << "waiting seq " << seq->seq_id << " holds a slot";
  }
  for (const Block& b : bm.blocks()) {
    ASSERT_EQ(b.ref_count, refs[b.block_id]) << "block " << b.block_id;
    ASSERT_NE(bm.is_free(b.block_id), bm.is_used(b.block_id)) << "block " << b.block_id;
    ASSERT_EQ(bm.is_free(b.block_id), b.ref_count == 0) << "block " << b.block_id;
    if (b.hash) {
      const std::optional<int32_t> mapped = bm.lookup(*b.hash);
      if (mapped) {
        ASSERT_EQ(bm.block(*mapped).hash, b.hash);
      }
    }
  }
}

struct Totals {
  int64_t preemptions = 0;
  int64_t cached_tokens = 0;
  int64_t rejected = 0;
  int64_t finished = 0;
  int64_t forked = 0;  // completions with index > 0
  int64_t stop_string_finishes = 0;
  int64_t steps_ahead = 0;     // async scheduling: steps launched before the previous one ended
  int64_t pending_inputs = 0;  // rows of those that took a pending input
};

void run_workload(uint64_t seed, const Tokenizer* tokenizer, Totals& totals,
                  bool async_scheduling) {
  const Workload w = make_workload(seed, tokenizer != nullptr);
  const EngineConfig& c = w.config;
  CheckingStepExecutor runner(w.vocab);
  runner.accept_pending = async_scheduling;
  BlockHashFn hash = compute_block_hash;
  if (w.force_collisions)
    hash = [](std::optional<uint64_t> prefix, std::span<const int32_t> tokens) {
      return compute_block_hash(prefix, tokens) & 3;
    };
  LLMEngine engine(c, runner, tokenizer, hash);
  runner.attach(engine.block_manager());
  runner.limits = step_limits(c);  // what the model runner enforces on every command

  std::map<int64_t, const Request*> accepted;  // by request id
  int64_t num_completions = 0;
  std::map<std::pair<int64_t, int>, RequestOutput> outputs;  // by (request id, index)
  size_t num_arrived = 0;
  std::vector<const Request*> by_arrival;
  for (const Request& r : w.requests) by_arrival.push_back(&r);
  std::stable_sort(by_arrival.begin(), by_arrival.end(), [](const Request* a, const Request* b) {
    return a->arrival_step < b->arrival_step;
  });
  for (int step = 0; num_arrived < by_arrival.size() || !engine.is_finished(); ++step) {
    ASSERT_LT(step, 20000) << "no progress";
    while (num_arrived < by_arrival.size() && by_arrival[num_arrived]->arrival_step <= step) {
      const Request& r = *by_arrival[num_arrived++];
      const AddRequestResult added = engine.add_request(r.prompt, r.params);
      ASSERT_EQ(!added.ok(), expect_rejected(r, c)) << added.error;
      if (added.ok()) {
        accepted.emplace(*added.seq_id, &r);
        num_completions += r.params.n;
      }
    }
    for (RequestOutput& out : engine.step()) {
      const auto key = std::make_pair(out.request_id, out.index);
      ASSERT_TRUE(outputs.emplace(key, std::move(out)).second) << "completion given twice";
    }
    check_invariants(engine);
    // No starvation: a decode step decodes every sequence still running after it (the ones
    // it could not fit were preempted back to waiting), so a running sequence never waits
    // more than the prefill steps between two decodes.
    if (runner.last_kind == StepKind::kDecode && !c.enable_chunked_prefill) {
      for (const Sequence* seq : engine.scheduler().running()) {
        ASSERT_TRUE(std::find(runner.last_seeds.begin(), runner.last_seeds.end(),
                              *seq->sampling_params.seed) != runner.last_seeds.end())
            << "seq " << seq->seq_id << " is running but was not decoded at step " << step;
      }
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_EQ(static_cast<int64_t>(outputs.size()), num_completions);
  for (const auto& [key, out] : outputs) {
    const auto [id, index] = key;
    const Request& r = *accepted.at(id);
    const uint64_t request_seed = r.params.seed ? *r.params.seed : default_sequence_seed(id);
    const auto [expected, stop] =
        reference_completion(completion_seed(request_seed, index), r.prompt, r.params, c, w.vocab);
    ASSERT_EQ(out.completion_token_ids, expected) << "request " << id << " completion " << index;
    ASSERT_EQ(out.stop_string.has_value(), stop >= 0) << "request " << id;
    if (stop >= 0) {
      ASSERT_EQ(*out.stop_string, r.params.stop[static_cast<size_t>(stop)]);
      ++totals.stop_string_finishes;
    }
    totals.forked += index > 0;
  }
  totals.preemptions += engine.stats().num_preemptions;
  totals.cached_tokens += engine.stats().num_cached_tokens;
  totals.rejected += engine.stats().num_rejected;
  totals.finished += engine.stats().num_finished;
  totals.steps_ahead += engine.stats().num_steps_ahead;
  totals.pending_inputs += runner.num_pending_inputs;
  if (!async_scheduling) {
    ASSERT_EQ(engine.stats().num_steps_ahead, 0);
  }
  ASSERT_LE(runner.max_batch_seqs, c.max_num_seqs);
  ASSERT_LE(runner.max_prefill_tokens, c.max_num_batched_tokens);
  // Zero leaks.
  EXPECT_EQ(engine.num_unfinished_requests(), 0);
  EXPECT_EQ(engine.block_manager().num_free_blocks(), c.num_kvcache_blocks);
  EXPECT_EQ(engine.block_manager().num_used_blocks(), 0);
  for (const Block& b : engine.block_manager().blocks()) EXPECT_EQ(b.ref_count, 0);
  EXPECT_EQ(engine.sampling_slots().num_free(), c.max_num_seqs);
  // Parameters travel once per first sample: each sequence's, and each recompute's (a
  // prompt preempted between chunks had not sampled, so its restart sends none extra).
  if (c.enable_chunked_prefill) {
    EXPECT_GE(runner.num_slot_fills, num_completions);
    EXPECT_LE(runner.num_slot_fills, num_completions + engine.stats().num_preemptions);
  } else {
    EXPECT_EQ(runner.num_slot_fills, num_completions + engine.stats().num_preemptions);
  }
}

constexpr uint64_t kNumWorkloads = 8000;

// Every workload seed 1..kNumWorkloads through run_workload (with Qwen3's tokenizer where it is
// found, and in CI always); stops at the first failure. has_tokenizer: whether it was found.
Totals run_workloads(bool async_scheduling, bool& has_tokenizer) {
  Totals totals;
  std::string why;
  has_tokenizer = nanovllm::testing::qwen3_tokenizer_json(&why).has_value();
  if (!has_tokenizer && nanovllm::testing::in_ci()) {
    ADD_FAILURE() << "reference missing in CI: " << why;
    return totals;
  }
  const Tokenizer* tokenizer = has_tokenizer ? nanovllm::testing::qwen3_tokenizer() : nullptr;
  for (uint64_t seed = 1; seed <= kNumWorkloads; ++seed) {
    SCOPED_TRACE("workload seed " + std::to_string(seed));
    run_workload(seed, tokenizer, totals, async_scheduling);
    if (::testing::Test::HasFailure()) break;
  }
  return totals;
}

TEST(SchedulerProperty, RandomWorkloadsKeepInvariantsAndMatchSequentialOutputs) {
  bool has_tokenizer = false;
  const Totals totals = run_workloads(/*async_scheduling=*/false, has_tokenizer);
  if (HasFailure()) return;
  // The generator must actually reach the interesting paths.
  EXPECT_GT(totals.preemptions, 100);
  EXPECT_GT(totals.cached_tokens, 1000);
  EXPECT_GT(totals.rejected, 10);
  EXPECT_GT(totals.finished, 10000);
  EXPECT_GT(totals.forked, 1000);
  if (has_tokenizer) {
    EXPECT_GT(totals.stop_string_finishes, 1000);
  }
  std::printf(
      "%lld finished (%lld forked, %lld by stop strings), %lld rejected, %lld preemptions, "
      "%lld cached tokens\n",
      static_cast<long long>(totals.finished), static_cast<long long>(totals.forked),
      static_cast<long long>(totals.stop_string_finishes), static_cast<long long>(totals.rejected),
      static_cast<long long>(totals.preemptions), static_cast<long long>(totals.cached_tokens));
}

// The same workloads with async scheduling: each decode of the running sequences is launched
// before the previous step's tokens are read (pending inputs), so a sequence that stops on an
// eos, a stop id or a stop string has one row computed past its end, which must be dropped
// without a trace: same outputs as the sequential reference, every block and slot given back.
TEST(SchedulerProperty, AsyncSchedulingKeepsInvariantsAndMatchesSequentialOutputs) {
  bool has_tokenizer = false;
  const Totals totals = run_workloads(/*async_scheduling=*/true, has_tokenizer);
  if (HasFailure()) return;
  EXPECT_GT(totals.steps_ahead, 30000);
  EXPECT_GE(totals.pending_inputs, totals.steps_ahead);
  EXPECT_GT(totals.preemptions, 100);
  EXPECT_GT(totals.finished, 10000);
  if (has_tokenizer) {
    EXPECT_GT(totals.stop_string_finishes, 1000);
  }
  std::printf("%lld steps launched ahead (%lld pending inputs), %lld finished, %lld preemptions\n",
              static_cast<long long>(totals.steps_ahead),
              static_cast<long long>(totals.pending_inputs),
              static_cast<long long>(totals.finished), static_cast<long long>(totals.preemptions));
}

}  // namespace
}  // namespace nanovllm
