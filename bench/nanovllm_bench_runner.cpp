#include "bench/nanovllm_bench_runner.h"

#include <chrono>
#include <stdexcept>
#include <utility>

#include "engine/job/interrupt.h"
#include "engine/llm_engine.h"
#include "engine/progress.h"
#include "kernels/check.h"

namespace nanovllm::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Per request: when its first and last tokens arrived (seconds from the run's start).
struct RequestTimes {
  double first = -1, last = -1;
  int64_t tokens = 0;
};

void add_all(LLMEngine& engine, const Workload& w) {
  for (size_t i = 0; i < w.requests.size(); ++i) {
    const AddRequestResult added = engine.add_request(w.requests[i].prompt, w.requests[i].params);
    if (!added.ok())
      throw std::runtime_error(w.name + ": request " + std::to_string(i) +
                               " does not fit the engine limits: " + added.error);
    CHECK_EQ(*added.seq_id, static_cast<int64_t>(i));  // a fresh engine numbers from 0
  }
}

}  // namespace

BenchRunner::BenchRunner(StepRecorder& executor, const EngineConfig& engine,
                         std::optional<LimitSetup> limit, const Tokenizer* tokenizer)
    : executor_(executor), engine_(engine), limit_(std::move(limit)), tokenizer_(tokenizer) {}

double BenchRunner::warm_up(double token_scale) {
  Workload w{"warm-up", "warm-up"};
  SamplingParams p;  // nano-vllm's SamplingParams(): temperature 1, 64 tokens
  p.max_tokens = static_cast<int32_t>(scaled_length(64, token_scale));
  p.ignore_eos = true;
  std::vector<int32_t> prompt(16);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(100 + i);
  w.requests.push_back(BenchRequest{prompt, p});
  const auto start = Clock::now();
  LLMEngine engine(engine_, executor_);
  add_all(engine, w);
  while (!engine.is_finished()) engine.step();
  executor_.take_steps();
  return seconds_since(start);
}

RunMeasure BenchRunner::run(const Workload& w) {
  RunMeasure m;
  m.num_requests = static_cast<int64_t>(w.requests.size());
  m.prompt_tokens = w.prompt_tokens();
  std::vector<RequestTimes> times(w.requests.size());
  ProgressOptions progress_options;
  progress_options.live = false;  // log lines: the table goes to stdout
  Progress progress(m.num_requests, progress_options);
  executor_.take_steps();

  const auto start = Clock::now();
  LLMEngine engine(engine_, executor_, tokenizer_);
  add_all(engine, w);
  while (!engine.is_finished()) {
    if (interrupt_requested()) throw std::runtime_error("interrupted");
    const int64_t prefill_steps = engine.stats().num_prefill_steps;
    const auto step_start = Clock::now();
    const std::vector<RequestOutput> finished = engine.step();
    const double step_s = seconds_since(step_start), now_s = seconds_since(start);
    (engine.stats().num_prefill_steps > prefill_steps ? m.prefill_s : m.decode_s) += step_s;
    // Sequences still running that just got their first token (finished ones below).
    for (const Sequence* seq : engine.scheduler().running()) {
      RequestTimes& t = times[static_cast<size_t>(seq->seq_id)];
      if (t.first < 0 && seq->num_completion_tokens() > 0) t.first = now_s;
    }
    for (const RequestOutput& out : finished) {
      RequestTimes& t = times[static_cast<size_t>(out.seq_id)];
      if (t.first < 0) t.first = now_s;
      t.last = now_s;
      t.tokens = static_cast<int64_t>(out.completion_token_ids.size());
      m.output_tokens += t.tokens;
      m.cached_tokens += out.num_cached_tokens;
      progress.request_finished(true);
    }
    progress.set_tokens(engine.stats().num_prefill_tokens, engine.stats().num_decode_tokens);
    progress.update();
  }
  m.elapsed_s = seconds_since(start);
  progress.finish();

  const EngineStats& stats = engine.stats();
  m.prefill_tokens = stats.num_prefill_tokens;
  m.decode_tokens = stats.num_decode_tokens;
  m.num_steps = stats.num_steps;
  int64_t tpot_requests = 0;
  for (const RequestTimes& t : times) {
    m.ttft_ms += 1e3 * t.first / static_cast<double>(times.size());
    if (t.tokens > 1) {
      m.tpot_ms += 1e3 * (t.last - t.first) / static_cast<double>(t.tokens - 1);
      ++tpot_requests;
    }
  }
  if (tpot_requests > 0) m.tpot_ms /= static_cast<double>(tpot_requests);

  const std::vector<RecordedStep> recorded = executor_.take_steps();
  CHECK_EQ(static_cast<int64_t>(recorded.size()), m.num_steps);
  std::vector<Step> steps, decode_steps;
  double gpu_s = 0;
  bool timed = !recorded.empty();
  for (const RecordedStep& r : recorded) {
    steps.push_back(r.step);
    if (!r.prefill) decode_steps.push_back(r.step);
    timed = timed && r.timing.has_value();
    if (r.timing) gpu_s += r.timing->gpu_ms / 1e3;
  }
  if (timed) m.gpu_s = gpu_s;
  if (limit_) {
    m.limit_s = run_limit_s(*limit_, steps);
    m.decode_limit_s = run_limit_s(*limit_, decode_steps);
    m.limit_breakdown = run_breakdown(*limit_, steps);
  }
  return m;
}

}  // namespace nanovllm::bench
