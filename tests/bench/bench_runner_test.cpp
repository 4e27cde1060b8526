// The benchmark's measurements over the real CPU model runner (tiny random-weight model):
// the runner's phase scopes time attention, GEMMs, element-wise work, the all-reduce (tp 2)
// and sampling when a timer is set and record nothing otherwise; the timed runner counts the
// workload's tokens and sums the limit over the steps it ran; the decode-step measurement
// fills its JSON (host and GPU figures null: the CPU has no CUDA events).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "bench/nanovllm_bench_decode_step.h"
#include "bench/nanovllm_bench_runner.h"
#include "engine/sequence.h"
#include "engine/step_builder.h"
#include "kernels/phase_timer.h"
#include "rank/model_runner.h"
#include "tests/layers/model_test_util.h"

namespace nanovllm::bench {
namespace {

constexpr int kBlockSize = 16;
constexpr int kBlocks = 32;

const test::TempModel& tiny() {
  static const test::TempModel model("tiny");
  return model;
}

ModelRunnerOptions cpu_options() {
  return ModelRunnerOptions{.block_size = kBlockSize, .num_kv_blocks = kBlocks, .cpu_threads = 1};
}

StepCommand prefill_of(int prompt_len) {
  static std::vector<std::unique_ptr<Sequence>> owned;  // the command copies what it needs
  SamplingParams params;
  params.seed = 1;  // the engine resolves every seed before a command is built
  owned.push_back(
      std::make_unique<Sequence>(0, std::vector<int32_t>(prompt_len, 11), params, kBlockSize));
  for (int b = 0; b < owned.back()->num_blocks(); ++b) owned.back()->block_table.push_back(b);
  const std::vector<Sequence*> seqs{owned.back().get()};
  SamplingSlots slots(1);  // each command is a run of its own: slot 0, parameters sent
  return build_prefill_command(seqs, kBlockSize, slots, {});
}

double phase(const PhaseTimes& t, Phase p) {
  return t[static_cast<size_t>(p)];
}

EngineConfig engine_config(int num_blocks) {
  EngineConfig e;
  e.max_num_batched_tokens = 64;
  e.max_num_seqs = 4;
  e.max_model_len = 64;
  e.kvcache_block_size = kBlockSize;
  e.num_kvcache_blocks = num_blocks;
  return e;
}

TEST(BenchRunnerInstrumentation, PhaseTimerSeesEveryPhaseOfACpuStepAndNothingWhenOff) {
  SingleRankCommunicator comm;
  ModelRunner runner(tiny().dir(), tiny().config(), comm, cpu_options());
  PhaseTimer timer(Device::kCpu);
  runner.execute(prefill_of(12));
  EXPECT_EQ(timer.num_pending(), 0u);  // no timer set: the scopes were no-ops

  ASSERT_TRUE(runner.set_phase_timer(&timer));
  runner.execute(prefill_of(12));
  const PhaseTimes t = timer.collect();
  EXPECT_GT(phase(t, Phase::kAttention), 0.0);
  EXPECT_GT(phase(t, Phase::kGemm), 0.0);
  EXPECT_GT(phase(t, Phase::kElementwise), 0.0);
  EXPECT_GT(phase(t, Phase::kSampling), 0.0);
  EXPECT_EQ(phase(t, Phase::kAllReduce), 0.0);  // one rank: no collective

  ASSERT_TRUE(runner.set_phase_timer(nullptr));
  runner.execute(prefill_of(12));
  EXPECT_EQ(timer.num_pending(), 0u);
}

TEST(BenchRunnerInstrumentation, AllReduceIsAPhaseUnderTensorParallelism) {
  std::vector<PhaseTimes> times(2);
  const StepCommand cmd = prefill_of(8);
  test::run_ranks(2, [&](int rank, Communicator& comm) {
    ModelRunner runner(tiny().dir(), tiny().config(), comm, cpu_options());
    PhaseTimer timer(Device::kCpu);
    runner.set_phase_timer(&timer);
    runner.execute(cmd);
    times[rank] = timer.collect();
  });
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_GT(phase(times[rank], Phase::kAllReduce), 0.0) << "rank " << rank;
    EXPECT_GT(phase(times[rank], Phase::kGemm), 0.0) << "rank " << rank;
  }
  EXPECT_GT(phase(times[0], Phase::kSampling), 0.0);
  EXPECT_EQ(phase(times[1], Phase::kSampling), 0.0);  // only rank 0 samples
}

TEST(BenchRunnerInstrumentation, CpuRunnerHasNoStepTimingButReportsItsStartUp) {
  SingleRankCommunicator comm;
  ModelRunner runner(tiny().dir(), tiny().config(), comm, cpu_options());
  EXPECT_FALSE(runner.set_step_timing(true));
  runner.execute(prefill_of(4));
  EXPECT_FALSE(runner.last_step_timing().has_value());
  ASSERT_TRUE(runner.startup_timing().has_value());
  EXPECT_GT(runner.startup_timing()->load_s, 0.0);
  EXPECT_EQ(runner.startup_timing()->graph_capture_s, 0.0);
}

TEST(BenchRunner, RunCountsTheWorkloadsTokensAndSumsTheLimitOverItsSteps) {
  SingleRankCommunicator comm;
  StepRecorder executor(
      std::make_unique<ModelRunner>(tiny().dir(), tiny().config(), comm, cpu_options()));
  const SamplingChoice sampling;
  const Workload w = fixed_workload(3, 10, 4, tiny().config().vocab_size, sampling);
  const RunMeasure no_limit = BenchRunner(executor, engine_config(kBlocks), std::nullopt).run(w);
  EXPECT_EQ(no_limit.num_requests, 3);
  EXPECT_EQ(no_limit.prompt_tokens, 30);
  EXPECT_EQ(no_limit.output_tokens, 12);
  EXPECT_EQ(no_limit.prefill_tokens, 30);
  EXPECT_EQ(no_limit.decode_tokens, 9);  // the first token of each comes from its prefill
  EXPECT_FALSE(no_limit.limit_s.has_value());
  EXPECT_FALSE(no_limit.gpu_s.has_value());
  EXPECT_GT(no_limit.ttft_ms, 0.0);
  EXPECT_GT(no_limit.tpot_ms, 0.0);

  const LimitSetup setup{model_shape(tiny().config()), 1, MachineLimits{"fake", 1, 1e11, 1e13}};
  const RunMeasure limited = BenchRunner(executor, engine_config(kBlocks), setup).run(w);
  ASSERT_TRUE(limited.limit_s.has_value());
  // One prefill of the three prompts, then three decode steps of three sequences.
  std::vector<Step> steps{prefill_step(std::vector<int64_t>{10, 10, 10})};
  for (int64_t context = 11; context <= 13; ++context) steps.push_back(decode_step(3, context));
  EXPECT_NEAR(*limited.limit_s, run_limit_s(setup, steps), 1e-12);
  // S_TG's own limit: the decode steps alone.
  ASSERT_TRUE(limited.decode_limit_s.has_value());
  EXPECT_NEAR(*limited.decode_limit_s, run_limit_s(setup, std::span<const Step>(steps).subspan(1)),
              1e-12);
  EXPECT_FALSE(limited.limit_breakdown.empty());
}

// interference on the CPU: 4 requests decode, then a 200-token prompt arrives (once each has
// 4 tokens); the gaps around it, the steady baseline before it and its TTFT are measured.
// The budget holds the whole late prompt, so this runs with or without chunked prefill.
TEST(BenchRunner, LateRequestArrivesAfterTheRunningOnesDecodeAndItsGapsAreMeasured) {
  SingleRankCommunicator comm;
  StepRecorder executor(
      std::make_unique<ModelRunner>(tiny().dir(), tiny().config(), comm, cpu_options()));
  InterferenceShape shape;
  shape.num_running = 4;
  shape.running_prompt_len = 8;
  shape.running_output_len = 40;
  shape.late_prompt_len = 200;
  shape.late_output_len = 4;
  shape.late_after_tokens = 4;
  const Workload w = interference_workload(shape, tiny().config().vocab_size, SamplingChoice{});
  EngineConfig e = engine_config(kBlocks);
  e.max_model_len = 256;
  e.max_num_batched_tokens = 256;
  e.max_num_seqs = 8;  // the late request runs beside the four
  ASSERT_LE(w.longest_sequence(), e.max_model_len);
  BenchRunner runner(executor, e, std::nullopt);
  runner.set_model_shape(model_shape(tiny().config()));
  const RunMeasure m = runner.run(w);
  EXPECT_EQ(m.num_requests, 5);
  EXPECT_EQ(m.prompt_tokens, 4 * 8 + 200);
  EXPECT_EQ(m.output_tokens, 4 * 40 + 4);  // the late request got its tokens
  EXPECT_EQ(m.prefill_tokens, 4 * 8 + 200);
  ASSERT_TRUE(m.interference.has_value());
  EXPECT_GT(m.interference->max_gap_ms, 0.0);
  EXPECT_GT(m.interference->baseline_max_gap_ms, 0.0);
  EXPECT_GT(m.interference->long_ttft_ms, 0.0);
  EXPECT_LT(m.interference->long_ttft_ms, 1e3 * m.elapsed_s);
  EXPECT_FALSE(m.flop_count.has_value());  // interference counts no FLOPs
  EXPECT_GE(m.num_steps, 40);              // one token per step: the running requests' 40
}

TEST(BenchRunner, PrefillFlopsOfACountingWorkload) {
  SingleRankCommunicator comm;
  StepRecorder executor(
      std::make_unique<ModelRunner>(tiny().dir(), tiny().config(), comm, cpu_options()));
  Workload w = fixed_workload(2, 12, 2, tiny().config().vocab_size, SamplingChoice{});
  w.count_prefill_flops = true;
  const ModelShape shape = model_shape(tiny().config());
  const std::vector<int64_t> lens{12, 12};
  BenchRunner cpu(executor, engine_config(kBlocks), std::nullopt);
  EXPECT_FALSE(cpu.run(w).flop_count.has_value());  // no shape, no limits
  cpu.set_model_shape(shape);
  const RunMeasure m = cpu.run(w);
  ASSERT_TRUE(m.flop_count.has_value());
  EXPECT_DOUBLE_EQ(*m.flop_count, prefill_flops(shape, lens));
  EXPECT_FALSE(m.prefill_flop_pct.has_value());  // no machine rate on the CPU
  EXPECT_FALSE(m.interference.has_value());

  const LimitSetup setup{shape, 1, MachineLimits{"fake", 1, 1e11, 1e13}};
  const RunMeasure limited = BenchRunner(executor, engine_config(kBlocks), setup).run(w);
  ASSERT_TRUE(limited.prefill_flop_pct.has_value());
  EXPECT_NEAR(*limited.prefill_flop_pct,
              100.0 * prefill_flops(shape, lens) / 1e13 / limited.prefill_s, 1e-9);
}

TEST(BenchDecodeStep, CpuMeasurementFillsThePhasesAndLeavesTheGpuFiguresNull) {
  SingleRankCommunicator comm;
  StepRecorder executor(
      std::make_unique<ModelRunner>(tiny().dir(), tiny().config(), comm, cpu_options()));
  DecodeStepSetup setup;
  setup.batch = 2;
  setup.context = 24;
  setup.vocab_size = tiny().config().vocab_size;
  setup.model_defaults.temperature = 0.6f;
  setup.model_defaults.top_k = 20;
  setup.device = Device::kCpu;
  const nlohmann::json j =
      measure_decode_step(executor, engine_config(kBlocks), setup, std::nullopt);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["batch"], 2);
  EXPECT_NEAR(j["context"].get<double>(), 24, 2);
  EXPECT_GT(j["step_ms"].get<double>(), 0.0);
  EXPECT_GT(j["greedy_step_ms"].get<double>(), 0.0);
  EXPECT_TRUE(j["sampling_cost_pct"].is_number());
  EXPECT_TRUE(j["limit_ms"].is_null());
  EXPECT_TRUE(j["gpu_ms"].is_null());
  EXPECT_TRUE(j["host_share_pct"].is_null());
  EXPECT_TRUE(j["phases_ms"]["host"].is_null());
  for (const char* p : {"attention", "gemm", "elementwise", "sampling"})
    EXPECT_GT(j["phases_ms"][p].get<double>(), 0.0) << p;
  EXPECT_EQ(j["phases_ms"]["all_reduce"].get<double>(), 0.0);
  EXPECT_EQ(j["measured_steps"], 16);
}

}  // namespace
}  // namespace nanovllm::bench
