// The whole model on the GPU against Hugging Face transformers (issue 6). Needs a CUDA
// device and two environment variables, else every test skips:
//   NANOVLLM_GPU_MODEL_DIR  a folder from `nanovllm-mkmodel --preset qwen3-0.6b --seed 1` (or 1.7b)
//   NANOVLLM_GPU_REFERENCE  its reference from scripts/make_gpu_reference.py
// (scripts/run_gpu_checks.sh sets both), and optionally
//   NANOVLLM_GPU_KV_CACHE_DTYPE  fp8 or int8: every runner keeps that 8-bit KV cache
//                                (--kv-cache-dtype; scripts/fp8_check.sh). The consistency tests
//                                (prefix caching, chunking, graphs, preemption) run, chunking and
//                                preemption with fp8's own bar (fp8_noise_bar); the three held to
//                                bf16's noise against transformers skip: fp8's error is
//                                measured against our bf16 cache's by
//                                scripts/check_fp8_kv_vs_transformers.py (issue 34's rule).
// Checks, on 36 prompts x 128 greedy tokens:
// teacher-forced top-1 and logprobs against transformers FP32 (and BF16, printed), greedy
// generations per vLLM's check_logprobs_close rule, that attention matters, and that prefix
// caching, CUDA graphs and preemption change nothing beyond bf16 noise.
//
// Tolerances come from the reference itself: transformers BF16 against transformers FP32 on
// the same prompts is the noise any bf16 implementation has. We keep activations in bf16 as
// it does, with other kernels (other summation orders), so we allow 1.5x its figures plus a
// small absolute margin (for a model whose bf16 noise happens to be tiny):
//   per-entry |logprob - fp32| <= 1.5 * hf_max + 0.25, mean <= 1.5 * hf_mean + 0.02,
//   top-1 disagreement rate    <= 1.5 * hf_disagreement + 0.005.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <string>

#include "engine/llm_engine.h"
#include "engine/sampling_slots.h"
#include "engine/step_builder.h"
#include "tests/rank/gpu_test_support.h"

namespace nanovllm {

namespace gpu_test {
namespace {

constexpr int kBlockSize = 16;      // small blocks: prefix-cache hits on short prefixes
constexpr int kRoomyBlocks = 1536;  // 36 prompts x (256 + 128) tokens = 864 blocks, room to spare
constexpr int kTinyBlocks = 48;     // two longest sequences: forces preemption
constexpr int kMaxModelLen = 512;   // longest prompt 256 + 128 generated
constexpr int kMaxNumSeqs = 64;     // 36 prompts run at once; graphs up to 64 rows
constexpr int kMaxBatchedTokens = 8192;  // all 36 prompts (~5k tokens) in one prefill
// "Far more than the tolerance": the tolerance is already 1.5x transformers' own bf16-vs-fp32
// noise on these random models (mean 8.6 / 12.7 nats on 0.6B / 1.7B), and the smallest shift
// measured on an H200 was 2.8x it (0.6B, p26), the others 4.7x-8.9x.
constexpr double kPerturbationRatio = 2.5;

// A CUDA runner through the production start-up (warm-up, frozen workspace, decode CUDA
// graphs unless eager) with an exact KV block count.
std::unique_ptr<ModelRunner> make_runner(const ModelConfig& config, Communicator& comm, int blocks,
                                         bool eager) {
  ModelRunnerOptions o;
  o.num_kv_blocks = blocks;
  o.enforce_eager = eager;
  o.max_num_batched_tokens = kMaxBatchedTokens;
  o.max_num_seqs = kMaxNumSeqs;
  o.max_model_len = kMaxModelLen;
  o.device = Device::kCuda;
  o.block_size = kBlockSize;
  o.kv_cache_dtype = cache_dtype();
  return std::make_unique<ModelRunner>(env()->model_dir, config, comm, o);
}

// The loaded reference and a roomy runner with default options, once per process.
struct Fixture {
  Reference ref;
  ModelConfig config;
  SingleRankCommunicator comm;
  std::unique_ptr<ModelRunner> runner;
  double tol_max = 0, tol_mean = 0, max_top1_disagreement = 0;
};
Fixture& fixture() {
  static std::unique_ptr<Fixture> f;
  if (!f) {
    f = std::make_unique<Fixture>();
    f->ref = load_reference(env()->reference);
    f->config = load_model_config(env()->model_dir);
    f->runner = make_runner(f->config, f->comm, kRoomyBlocks, false);
    f->tol_max = 1.5 * f->ref.hf.dev_max + 0.25;
    f->tol_mean = 1.5 * f->ref.hf.dev_mean + 0.02;
    f->max_top1_disagreement = 1.5 * (1.0 - f->ref.hf.top1_agreement) + 0.005;
    std::printf(
        "[%s] tolerances: per-entry %.3f, mean %.3f nats, top-1 disagreement %.4f "
        "(hf bf16 vs fp32: max %.3f mean %.4f p99 %.3f, top-1 %.4f, greedy close %d/%d, "
        "mean agreed %.1f tokens)\n",
        f->ref.preset.c_str(), f->tol_max, f->tol_mean, f->max_top1_disagreement, f->ref.hf.dev_max,
        f->ref.hf.dev_mean, f->ref.hf.dev_p99, f->ref.hf.top1_agreement, f->ref.hf.greedy_close_ok,
        f->ref.hf.greedy_prompts, f->ref.hf.greedy_mean_agreed);
  }
  return *f;
}

// Logits of every computed row of a prefill, on the host: [rows * V], with row access.
struct PrefillLogits {
  std::vector<float> host;
  int64_t v = 0;
  LogitRow row(size_t r) const { return LogitRow(host.data() + r * static_cast<size_t>(v), v); }
  size_t rows() const { return v ? host.size() / static_cast<size_t>(v) : 0; }
};
PrefillLogits all_rows(ModelRunner& runner, StepCommand cmd) {
  cmd.logits_indices.resize(static_cast<size_t>(cmd.num_tokens()));
  std::iota(cmd.logits_indices.begin(), cmd.logits_indices.end(), 0);
  const TensorView logits = runner.run_model(cmd);  // [T, V] f32
  return {logits_to_host(logits), logits.size(1)};
}

// Our logits at every prompt position, one fresh prefill into blocks 0, 1, ...
PrefillLogits teacher_forced(ModelRunner& runner, const std::vector<int32_t>& ids) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.seed = 0;
  Sequence seq(0, ids, params, kBlockSize);
  for (int b = 0; b < seq.num_blocks(); ++b) seq.block_table.push_back(b);
  Sequence* seqs[] = {&seq};
  SamplingSlots slots(1);
  return all_rows(runner, build_prefill_command(seqs, kBlockSize, slots, {}));
}

// |ours - reference| over a reference top-5 row (tokens and logprobs).
struct Deviation {
  double max = 0, sum = 0;
  int64_t n = 0, positions = 0, top1_agree = 0;
  void add(const LogitRow& ours, const std::vector<TopEntry>& want) {
    ++positions;
    top1_agree += ours.top(1)[0].token == want[0].token;
    for (const TopEntry& e : want) {
      const double d = std::abs(ours.logprob(e.token) - e.logprob);
      max = std::max(max, d);
      sum += d;
      ++n;
    }
  }
  double mean() const { return n ? sum / static_cast<double>(n) : 0.0; }
  double top1_rate() const {
    return positions ? static_cast<double>(top1_agree) / static_cast<double>(positions) : 1.0;
  }
};

TEST(GpuGeneration, TeacherForcedLogprobsMatchTransformersWithinBf16Noise) {
  SKIP_WITHOUT_GPU_MODEL();
  SKIP_WITH_FP8_CACHE();
  Fixture& f = fixture();
  Deviation vs_fp32, vs_bf16;
  for (const RefPrompt& p : f.ref.prompts) {
    const PrefillLogits lp = teacher_forced(*f.runner, p.ids);
    ASSERT_EQ(lp.rows(), p.fp32.teacher_forced_top5.size()) << p.name;
    Deviation one;
    for (size_t pos = 0; pos < lp.rows(); ++pos) {
      vs_fp32.add(lp.row(pos), p.fp32.teacher_forced_top5[pos]);
      vs_bf16.add(lp.row(pos), p.bf16.teacher_forced_top5[pos]);
      one.add(lp.row(pos), p.fp32.teacher_forced_top5[pos]);
    }
    EXPECT_LE(one.max, f.tol_max) << p.name;
  }
  std::printf(
      "[%s] teacher forcing over %lld positions: vs fp32 top-1 %.4f, |dev| max %.3f mean %.4f; "
      "vs bf16 top-1 %.4f, |dev| max %.3f mean %.4f\n",
      f.ref.preset.c_str(), static_cast<long long>(vs_fp32.positions), vs_fp32.top1_rate(),
      vs_fp32.max, vs_fp32.mean(), vs_bf16.top1_rate(), vs_bf16.max, vs_bf16.mean());
  EXPECT_LE(vs_fp32.max, f.tol_max);
  EXPECT_LE(vs_fp32.mean(), f.tol_mean);
  EXPECT_LE(1.0 - vs_fp32.top1_rate(), f.max_top1_disagreement);
}

TEST(GpuGeneration, ChangingTokenOneMovesLastLogprobsFarBeyondTolerance) {
  SKIP_WITHOUT_GPU_MODEL();
  SKIP_WITH_FP8_CACHE();
  Fixture& f = fixture();
  int checked = 0;
  for (const RefPrompt& p : f.ref.prompts) {
    if (p.perturbed_of < 0) continue;
    const RefPrompt& base = f.ref.prompts.at(static_cast<size_t>(p.perturbed_of));
    const PrefillLogits base_lp = teacher_forced(*f.runner, base.ids);
    const PrefillLogits moved_lp = teacher_forced(*f.runner, p.ids);
    const LogitRow ours_base = base_lp.row(base_lp.rows() - 1),
                   ours_moved = moved_lp.row(moved_lp.rows() - 1);
    double ours = 0, theirs = 0;  // max |change| over the unperturbed fp32 last top-5
    const std::vector<TopEntry>& top = base.fp32.teacher_forced_top5.back();
    for (size_t k = 0; k < top.size(); ++k) {
      ours = std::max(ours,
                      std::abs(ours_moved.logprob(top[k].token) - ours_base.logprob(top[k].token)));
      // The perturbed run's logprob of that token: from its own top-5 if there, else below its 5th.
      double moved = p.fp32.teacher_forced_top5.back().back().logprob;
      for (const TopEntry& e : p.fp32.teacher_forced_top5.back())
        if (e.token == top[k].token) moved = e.logprob;
      theirs = std::max(theirs, std::abs(moved - top[k].logprob));
    }
    std::printf(
        "[%s] %s: last-position logprobs move by %.3f (transformers fp32: >= %.3f); tolerance "
        "%.3f\n",
        f.ref.preset.c_str(), p.name.c_str(), ours, theirs, f.tol_mean);
    EXPECT_GE(ours, kPerturbationRatio * f.tol_mean) << p.name;
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

TEST(GpuGeneration, PrefixCachedTailLogprobsMatchAFreshPrefill) {
  SKIP_WITHOUT_GPU_MODEL();
  Fixture& f = fixture();
  // p00..p03 share their first 100 tokens: 6 full blocks. Prefill p00 into blocks 0..,
  // then each other one on top of p00's first 6 blocks, computing only its tail.
  const RefPrompt& first = f.ref.prompts.at(0);
  ASSERT_NE(first.name.find("shared100"), std::string::npos) << "unexpected reference layout";
  teacher_forced(*f.runner, first.ids);  // fills blocks 0..ceil(len/16)-1
  constexpr int kCachedBlocks = 6, kCached = kCachedBlocks * kBlockSize;
  Deviation dev;
  for (size_t i = 1; i < 4; ++i) {
    const RefPrompt& p = f.ref.prompts.at(i);
    ASSERT_TRUE(std::equal(p.ids.begin(), p.ids.begin() + kCached, first.ids.begin())) << p.name;
    SamplingParams params;
    params.temperature = 0.0f;
    params.seed = 1;
    Sequence seq(1, p.ids, params, kBlockSize);
    for (int b = 0; b < seq.num_blocks(); ++b)
      seq.block_table.push_back(b < kCachedBlocks ? b : 1000 + b);
    seq.num_cached_tokens = seq.num_computed_tokens = kCached;
    Sequence* seqs[] = {&seq};
    SamplingSlots slots(1);
    StepCommand cmd = build_prefill_command(seqs, kBlockSize, slots, {});
    ASSERT_EQ(cmd.num_tokens(), static_cast<int>(p.ids.size()) - kCached);
    const PrefillLogits tail = all_rows(*f.runner, cmd);
    const PrefillLogits fresh =
        teacher_forced(*f.runner, p.ids);  // rewrites blocks 0.. (same prefix)
    for (size_t r = 0; r < tail.rows(); ++r) dev.add(tail.row(r), fresh.row(kCached + r).top(5));
  }
  std::printf(
      "[%s] prefix-cached tails vs fresh prefill: %lld positions, top-1 %.4f, |dev| max %.3f mean "
      "%.4f\n",
      f.ref.preset.c_str(), static_cast<long long>(dev.positions), dev.top1_rate(), dev.max,
      dev.mean());
  EXPECT_GT(dev.positions, 0);
  EXPECT_LE(dev.max, f.tol_max);
  EXPECT_LE(dev.mean(), f.tol_mean);
}

EngineConfig engine_config(const ModelRunner& runner, const Fixture& f,
                           int budget = kMaxBatchedTokens,
                           int threshold = EngineConfig{}.long_prefill_token_threshold) {
  EngineConfig config;
  config.kvcache_block_size = kBlockSize;
  config.num_kvcache_blocks = runner.num_kv_blocks();
  config.max_model_len = kMaxModelLen;
  config.max_num_seqs = kMaxNumSeqs;
  config.max_num_batched_tokens = budget;
  config.long_prefill_token_threshold = threshold;
  config.eos_token_ids = f.config.eos_token_ids;
  return config;
}

// Every reference prompt, greedy for f.ref.steps tokens; returns seq id -> prompt index.
std::map<int64_t, size_t> add_reference_prompts(LLMEngine& engine, const Fixture& f) {
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < f.ref.prompts.size(); ++i) {
    SamplingParams params;
    params.temperature = 0.0f;
    params.max_tokens = f.ref.steps;
    params.ignore_eos = true;  // the reference treats eos as an ordinary token
    params.seed = i;           // tells the recorder's rows apart
    const AddRequestResult r = engine.add_request(f.ref.prompts[i].ids, params);
    EXPECT_TRUE(r.ok()) << r.error;
    if (r.ok()) index[*r.seq_id] = i;
  }
  return index;
}

// Greedy generation of every reference prompt through LLMEngine, recording each step's top-5.
struct EngineRun {
  std::vector<std::vector<GreedyStep>> steps;  // [prompt][step]
  EngineStats stats;
  int argmax_mismatches = 0;
};
// budget / threshold: the step's token budget and long-prefill threshold (chunked prefill).
EngineRun generate(ModelRunner& runner, const Fixture& f, BlockHashFn hash_fn = compute_block_hash,
                   int budget = kMaxBatchedTokens,
                   int threshold = EngineConfig{}.long_prefill_token_threshold) {
  const auto start = std::chrono::steady_clock::now();
  RecordingStepExecutor recorder(runner);
  LLMEngine engine(engine_config(runner, f, budget, threshold), recorder, std::move(hash_fn));
  const std::map<int64_t, size_t> index = add_reference_prompts(engine, f);
  EngineRun run;
  run.steps.resize(f.ref.prompts.size());
  for (int n = 0; !engine.is_finished() && n < 100000; ++n)
    for (const RequestOutput& out : engine.step()) {
      const size_t i = index.at(out.seq_id);
      std::vector<GreedyStep> steps =
          recorder.completion_steps(i, static_cast<int>(f.ref.prompts[i].ids.size()));
      std::vector<int32_t> tokens;
      for (const GreedyStep& s : steps) tokens.push_back(s.token);
      EXPECT_EQ(tokens, out.completion_token_ids) << f.ref.prompts[index.at(out.seq_id)].name;
      run.steps[index.at(out.seq_id)] = std::move(steps);
    }
  EXPECT_TRUE(engine.is_finished());
  run.stats = engine.stats();
  run.argmax_mismatches = recorder.argmax_mismatches();
  std::printf(
      "[%s] generated %zu x %d tokens in %.1f s (%lld steps, %lld preemptions, %lld cached "
      "tokens)\n",
      f.ref.preset.c_str(), run.steps.size(), f.ref.steps,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      static_cast<long long>(run.stats.num_steps),
      static_cast<long long>(run.stats.num_preemptions),
      static_cast<long long>(run.stats.num_cached_tokens));
  return run;
}

// Two greedy runs (ours or transformers') per vLLM's rule, and their logprobs over the steps
// whose contexts are equal (up to and including the first mismatch), on shared top-5 tokens.
struct RunComparison {
  int prompts = 0, close = 0, identical = 0;
  double agreed_sum = 0, dev_max = 0, dev_sum = 0;
  int64_t dev_n = 0;
  double mean_agreed() const { return prompts ? agreed_sum / prompts : 0.0; }
  double dev_mean() const { return dev_n ? dev_sum / static_cast<double>(dev_n) : 0.0; }
};
// min_close: how many prompts must pass vLLM's rule (every prompt unless said otherwise).
RunComparison compare_runs(const Fixture& f, const char* what,
                           const std::vector<std::vector<GreedyStep>>& ours,
                           const std::vector<const std::vector<GreedyStep>*>& theirs,
                           int min_close = -1) {
  RunComparison c;
  for (size_t i = 0; i < ours.size(); ++i) {
    const GreedyMatch m = greedy_close(ours[i], *theirs[i]);
    ++c.prompts;
    c.close += m.ok;
    c.identical += m.agreed == static_cast<int>(theirs[i]->size());
    c.agreed_sum += m.agreed;
    if (!m.ok)
      std::printf("[%s] %s: %s diverges at step %d without a near-tie\n", f.ref.preset.c_str(),
                  what, f.ref.prompts[i].name.c_str(), m.agreed);
    for (size_t s = 0;
         s <= static_cast<size_t>(m.agreed) && s < ours[i].size() && s < theirs[i]->size(); ++s)
      for (const TopEntry& a : ours[i][s].top)
        for (const TopEntry& b : (*theirs[i])[s].top)
          if (a.token == b.token) {
            c.dev_max = std::max(c.dev_max, std::abs(a.logprob - b.logprob));
            c.dev_sum += std::abs(a.logprob - b.logprob);
            ++c.dev_n;
          }
  }
  std::printf(
      "[%s] %s: greedy close %d/%d, identical %d, mean agreed %.1f tokens; step logprobs |dev| "
      "max %.3f mean %.4f over %lld\n",
      f.ref.preset.c_str(), what, c.close, c.prompts, c.identical, c.mean_agreed(), c.dev_max,
      c.dev_mean(), static_cast<long long>(c.dev_n));
  EXPECT_GE(c.close, min_close < 0 ? c.prompts : min_close) << what;
  EXPECT_LE(c.dev_max, f.tol_max) << what;
  EXPECT_LE(c.dev_mean(), f.tol_mean) << what;
  return c;
}

std::vector<const std::vector<GreedyStep>*> pointers(
    const std::vector<std::vector<GreedyStep>>& runs) {
  std::vector<const std::vector<GreedyStep>*> out;
  for (const auto& r : runs) out.push_back(&r);
  return out;
}

// The default configuration: roomy cache, prefix caching, CUDA graphs.
const EngineRun& baseline() {
  static std::optional<EngineRun> run;
  if (!run) run = generate(*fixture().runner, fixture());
  return *run;
}

TEST(GpuGeneration, GreedyGenerationsAgreeWithTransformersUntilANearTie) {
  SKIP_WITHOUT_GPU_MODEL();
  const Fixture& f = fixture();
  const EngineRun& ours = baseline();
  EXPECT_EQ(ours.argmax_mismatches, 0) << "greedy sampler picked a token other than the argmax";
  SKIP_WITH_FP8_CACHE();
  std::vector<const std::vector<GreedyStep>*> fp32, bf16;
  for (const RefPrompt& p : f.ref.prompts) {
    ASSERT_EQ(p.fp32.greedy.size(), static_cast<size_t>(f.ref.steps)) << p.name;
    fp32.push_back(&p.fp32.greedy);
    bf16.push_back(&p.bf16.greedy);
  }
  // Against transformers, the bar is transformers' own bf16 run: on the random 0.6B model its
  // bf16 greedy runs pass vLLM's rule against fp32 for only 32 of 36 prompts (chaotic logits,
  // bf16 rounding flips near-argmax choices), so demanding 36/36 of ours would test the model,
  // not the implementation. Ours may miss at most 2 more prompts than transformers bf16 does.
  compare_runs(f, "ours vs transformers fp32", ours.steps, fp32, f.ref.hf.greedy_close_ok - 2);
  // BF16 transformers is no reference for us; its figures are printed for scale only.
  RunComparison hf;
  for (size_t i = 0; i < f.ref.prompts.size(); ++i)
    hf.agreed_sum += greedy_close(*bf16[i], *fp32[i]).agreed;
  std::printf("[%s] transformers bf16 vs fp32: mean agreed %.1f tokens\n", f.ref.preset.c_str(),
              hf.agreed_sum / static_cast<double>(f.ref.prompts.size()));
}

TEST(GpuGeneration, PrefixCachingOffGivesTheSameGenerationsAsOn) {
  SKIP_WITHOUT_GPU_MODEL();
  const Fixture& f = fixture();
  auto counter = std::make_shared<uint64_t>(0);  // a hash that never repeats: no cache hits
  const EngineRun off =
      generate(*f.runner, f,
               [counter](std::optional<uint64_t>, std::span<const int32_t>) { return ++*counter; });
  EXPECT_GT(baseline().stats.num_cached_tokens, 0);
  EXPECT_EQ(off.stats.num_cached_tokens, 0);
  compare_runs(f, "prefix cache off vs on", off.steps, pointers(baseline().steps));
}

// The bar of a run whose batch shapes differ from the baseline's (chunking, recomputation
// after preemption): `bar` prompts under bf16. Under fp8 a bf16-ulp difference in a stored K or
// V value (other GEMM shapes) can flip its fp8 rounding, a change of up to 1/16 of the value,
// so the two runs differ by fp8's noise, not bf16's: they may move the greedy paths no more
// than the fp8 cache itself moves them from transformers fp32. The logprob deviations stay
// held to bf16's tolerances.
int fp8_noise_bar(const Fixture& f, int bar) {
  if (!fp8_cache()) return bar;
  int fp8_close = 0;
  for (size_t i = 0; i < f.ref.prompts.size(); ++i)
    fp8_close += greedy_close(baseline().steps[i], f.ref.prompts[i].fp32.greedy).ok;
  std::printf("[%s] fp8 cache: %d/%zu greedy runs close to transformers fp32\n",
              f.ref.preset.c_str(), fp8_close, f.ref.prompts.size());
  return std::min(bar, fp8_close);
}

TEST(GpuGeneration, ChunkedPrefillGivesTheSameGenerationsAsWholePrompts) {
  SKIP_WITHOUT_GPU_MODEL();
  const Fixture& f = fixture();
  // A 64-token budget and 32-token chunks: every prompt (46 to 256 tokens) goes in chunks,
  // in steps mixed with the running decodes.
  const EngineRun run = generate(*f.runner, f, compute_block_hash, kMaxNumSeqs, 32);
  EXPECT_GT(run.stats.num_prefill_steps, baseline().stats.num_prefill_steps);
  // Other batch shapes run other GEMM and attention kernels (decode rows go through the
  // prefill path in mixed steps): another bf16 rounding order, not bit equality. It must stay
  // at least as close as transformers' own bf16 run is to its fp32 one (32/36 on the random
  // 0.6B, whose greedy paths are chaotic; 36/36 on 1.7B).
  const int min_close = fp8_noise_bar(f, f.ref.hf.greedy_close_ok);
  compare_runs(f, "chunked prefill vs whole prompts", run.steps, pointers(baseline().steps),
               min_close);
}

TEST(GpuGeneration, EagerGivesTheSameGenerationsAsCudaGraphs) {
  SKIP_WITHOUT_GPU_MODEL();
  const Fixture& f = fixture();
  SingleRankCommunicator comm;
  std::unique_ptr<ModelRunner> eager = make_runner(f.config, comm, kRoomyBlocks, true);
  const EngineRun run = generate(*eager, f);
  compare_runs(f, "eager vs cuda graphs", run.steps, pointers(baseline().steps));
}

TEST(GpuGeneration, TinyKvCacheWithPreemptionGivesTheSameGenerations) {
  SKIP_WITHOUT_GPU_MODEL();
  const Fixture& f = fixture();
  SingleRankCommunicator comm;
  std::unique_ptr<ModelRunner> tiny = make_runner(f.config, comm, kTinyBlocks, false);
  const EngineRun run = generate(*tiny, f);
  EXPECT_GT(run.stats.num_preemptions, 0);
  // A preempted sequence's recomputation prefills its prompt and tokens in one step, where
  // the baseline decoded them one by one: fp8's bar (fp8_noise_bar), every prompt under bf16.
  compare_runs(f, "tiny cache (preemption) vs roomy", run.steps, pointers(baseline().steps),
               fp8_noise_bar(f, static_cast<int>(f.ref.prompts.size())));
}

// Async scheduling through the model runner itself (no recorder in between: it takes pending
// inputs): each decode step is launched before the one before it is read, its input tokens
// taken from the sampler's last_tokens on the device. The same greedy tokens as the baseline,
// whose steps ran one after the other.
TEST(GpuGeneration, AsyncSchedulingGivesTheSameGenerations) {
  SKIP_WITHOUT_GPU_MODEL();
  const Fixture& f = fixture();
  ModelRunner& runner = *f.runner;
  ASSERT_TRUE(runner.accepts_pending_inputs(1)) << "one GPU with decode graphs takes them";
  LLMEngine engine(engine_config(runner, f), runner);
  const std::map<int64_t, size_t> index = add_reference_prompts(engine, f);
  std::vector<std::vector<int32_t>> tokens(f.ref.prompts.size());  // [prompt][step]
  for (int n = 0; !engine.is_finished() && n < 100000; ++n)
    for (RequestOutput& out : engine.step())
      tokens[index.at(out.seq_id)] = std::move(out.completion_token_ids);
  ASSERT_TRUE(engine.is_finished());
  EXPECT_GT(engine.stats().num_steps_ahead, engine.stats().num_decode_steps / 2);
  int identical = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<int32_t> expected;
    for (const GreedyStep& s : baseline().steps[i]) expected.push_back(s.token);
    identical += tokens[i] == expected;
    EXPECT_EQ(tokens[i], expected) << f.ref.prompts[i].name;
  }
  std::printf("[%s] async scheduling: %lld of %lld decode steps ahead, %d/%zu prompts identical\n",
              f.ref.preset.c_str(), static_cast<long long>(engine.stats().num_steps_ahead),
              static_cast<long long>(engine.stats().num_decode_steps), identical, tokens.size());
}

}  // namespace
}  // namespace gpu_test
}  // namespace nanovllm
