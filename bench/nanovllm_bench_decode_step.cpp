#include "bench/nanovllm_bench_decode_step.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "engine/llm_engine.h"
#include "kernels/phase_timer.h"

namespace nanovllm::bench {

namespace {

constexpr int kWarmSteps = 4;       // decode steps skipped (first replays, allocator)
constexpr int kMeasuredSteps = 16;  // decode steps measured

struct DecodeSample {
  double wall_ms = 0;
  std::optional<StepTiming> timing;
  PhaseTimes phases{};
  double context = 0;  // mean context of the step's sequences
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

template <typename F>
double median_of(const std::vector<DecodeSample>& samples, F field) {
  std::vector<double> v;
  for (const DecodeSample& s : samples) v.push_back(field(s));
  return median(v);
}

// One pass: `batch` prompts of the same length (random ids), decoded past the warm-up steps;
// the measured decode steps that ran the whole batch.
std::vector<DecodeSample> run_pass(StepRecorder& executor, const EngineConfig& engine,
                                   const DecodeStepSetup& setup, int batch, int context,
                                   SamplingParams params, PhaseTimer* timer) {
  params.max_tokens = kWarmSteps + kMeasuredSteps + 1;  // the first token comes from prefill
  params.ignore_eos = true;
  const int prompt_len = std::max(1, context - kWarmSteps - kMeasuredSteps / 2);
  std::mt19937_64 rng(3000);
  std::uniform_int_distribution<int32_t> id(
      0, static_cast<int32_t>(std::min<int64_t>(10000, setup.vocab_size) - 1));
  LLMEngine e(engine, executor);
  for (int i = 0; i < batch; ++i) {
    std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));  // [prompt_len]
    for (int32_t& t : prompt) t = id(rng);
    const AddRequestResult added = e.add_request(std::move(prompt), params);
    if (!added.ok()) throw std::runtime_error("decode step: " + added.error);
  }
  executor.take_steps();
  executor.set_phase_timer(timer);
  std::vector<DecodeSample> samples;
  int decode_index = 0;
  while (!e.is_finished()) {
    const int64_t decode_steps = e.stats().num_decode_steps;
    const auto start = std::chrono::steady_clock::now();
    e.step();
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const PhaseTimes phases = timer ? timer->collect() : PhaseTimes{};
    const RecordedStep& step = executor.last_collected();
    if (e.stats().num_decode_steps == decode_steps) continue;  // a prefill step
    const int index = decode_index++;
    if (index < kWarmSteps || static_cast<int>(step.step.seqs.size()) != batch) continue;
    DecodeSample s{wall_ms, step.timing, phases, 0};
    for (const SeqStep& q : step.step.seqs) s.context += static_cast<double>(q.context_len) / batch;
    samples.push_back(s);
  }
  executor.set_phase_timer(nullptr);
  executor.take_steps();
  return samples;
}

SamplingParams model_default_sampling(const SamplingOverrides& d) {
  SamplingParams p;  // temperature 1 unless the folder says otherwise
  if (d.temperature) p.temperature = *d.temperature;
  if (d.top_k) p.top_k = *d.top_k;
  if (d.top_p) p.top_p = *d.top_p;
  if (d.min_p) p.min_p = *d.min_p;
  return p;
}

}  // namespace

nlohmann::json measure_decode_step(StepRecorder& executor, const EngineConfig& engine,
                                   const DecodeStepSetup& setup,
                                   const std::optional<LimitSetup>& limit) {
  const int batch = std::min(setup.batch, engine.max_num_seqs);
  const int context = std::min(setup.context, engine.max_model_len - kMeasuredSteps);
  if (batch != setup.batch || context != setup.context)
    spdlog::warn("decode step: batch {} at context {} (the engine limits cap the asked {} at {})",
                 batch, context, setup.batch, setup.context);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  const SamplingParams defaults = model_default_sampling(setup.model_defaults);
  PhaseTimer timer(setup.device);
  spdlog::info("decode step: batch {}, context ~{}: greedy, default sampling, profiled", batch,
               context);
  const std::vector<DecodeSample> g =
      run_pass(executor, engine, setup, batch, context, greedy, nullptr);
  const std::vector<DecodeSample> d =
      run_pass(executor, engine, setup, batch, context, defaults, nullptr);
  const std::vector<DecodeSample> p =
      run_pass(executor, engine, setup, batch, context, defaults, &timer);
  if (g.empty() || d.empty() || p.empty()) {
    spdlog::warn("decode step: no step ran the whole batch of {} (the KV cache is too small?)",
                 batch);
    return nullptr;
  }
  const bool timed = d.front().timing.has_value();
  const double step_ms = median_of(d, [](const DecodeSample& s) { return s.wall_ms; });
  const double greedy_ms = median_of(g, [](const DecodeSample& s) { return s.wall_ms; });
  const double gpu_ms =
      median_of(d, [](const DecodeSample& s) { return s.timing ? s.timing->gpu_ms : 0; });
  const double gap_ms =
      median_of(d, [](const DecodeSample& s) { return s.timing ? s.timing->gap_ms : 0; });
  const double mean_context = median_of(d, [](const DecodeSample& s) { return s.context; });
  nlohmann::json phases = nlohmann::json::object();
  for (size_t i = 0; i < kNumPhases; ++i)
    phases[phase_name(static_cast<Phase>(i))] =
        median_of(p, [i](const DecodeSample& s) { return s.phases[i]; });
  phases["host"] = timed ? nlohmann::json(gap_ms) : nlohmann::json(nullptr);

  nlohmann::json j;
  j["batch"] = batch;
  j["context"] = static_cast<int64_t>(std::lround(mean_context));
  j["step_ms"] = step_ms;
  j["greedy_step_ms"] = greedy_ms;
  j["eager_step_ms"] = median_of(p, [](const DecodeSample& s) { return s.wall_ms; });
  j["gpu_ms"] = timed ? nlohmann::json(gpu_ms) : nlohmann::json(nullptr);
  j["limit_ms"] = nullptr;
  j["pct_of_limit"] = nullptr;
  if (limit) {
    const double limit_ms =
        1e3 * step_limit_s(*limit, decode_step(batch, std::lround(mean_context)));
    j["limit_ms"] = limit_ms;
    j["pct_of_limit"] = 100.0 * limit_ms / step_ms;
  }
  j["sampling_cost_pct"] = 100.0 * (step_ms - greedy_ms) / step_ms;
  j["host_share_pct"] = timed && gpu_ms + gap_ms > 0
                            ? nlohmann::json(100.0 * gap_ms / (gpu_ms + gap_ms))
                            : nlohmann::json(nullptr);
  j["phases_ms"] = phases;
  j["measured_steps"] = static_cast<int64_t>(d.size());
  return j;
}

}  // namespace nanovllm::bench
