#include "bench/nanovllm_bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <utility>
#include <vector>

#include "bench/nanovllm_bench_stop.h"
#include "engine/job/interrupt.h"
#include "engine/llm_engine.h"
#include "kernels/check.h"

namespace nanovllm::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Per request: when it was added and when its first and last tokens arrived (seconds from
// the run's start).
struct RequestTimes {
  double arrival = 0, first = -1, last = -1;
  int64_t tokens = 0;  // completion tokens seen so far
  bool finished = false;
  std::vector<double> token_times;  // each token's arrival (running requests, late workloads)
};

// Adds `requests`, which the fresh engine numbers first_id, first_id + 1, ...
void add_requests(LLMEngine& engine, const std::string& name,
                  const std::vector<BenchRequest>& requests, int64_t first_id) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const AddRequestResult added = engine.add_request(requests[i].prompt, requests[i].params);
    const int64_t id = first_id + static_cast<int64_t>(i);
    if (!added.ok())
      throw std::runtime_error(name + ": request " + std::to_string(id) +
                               " does not fit the engine limits: " + added.error);
    CHECK_EQ(*added.seq_id, id);  // a fresh engine numbers from 0, in order
  }
}

// The gaps between consecutive tokens of the running requests around the late one.
InterferenceMeasure interference_of(const std::vector<RequestTimes>& times, size_t num_running,
                                    double late_added_s) {
  InterferenceMeasure im;
  const RequestTimes& late = times[num_running];
  im.long_ttft_ms = 1e3 * (late.first - late.arrival);
  double all_first = 0;  // every running request had its first token
  for (size_t i = 0; i < num_running; ++i)
    if (!times[i].token_times.empty())
      all_first = std::max(all_first, times[i].token_times.front());
  for (size_t i = 0; i < num_running; ++i) {
    const std::vector<double>& tt = times[i].token_times;
    for (size_t k = 1; k < tt.size(); ++k) {
      const double gap_ms = 1e3 * (tt[k] - tt[k - 1]);
      if (tt[k] > late_added_s && tt[k - 1] < late.first)
        im.max_gap_ms = std::max(im.max_gap_ms, gap_ms);
      if (tt[k - 1] >= all_first && tt[k] <= late_added_s)
        im.baseline_max_gap_ms = std::max(im.baseline_max_gap_ms, gap_ms);
    }
  }
  return im;
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
  add_requests(engine, w.name, w.requests, 0);
  while (!engine.is_finished()) {
    throw_if_stopped();
    engine.step();
  }
  executor_.take_steps();
  return seconds_since(start);
}

RunMeasure BenchRunner::run(const Workload& w, BenchProgress* progress) {
  RunMeasure m;
  m.num_requests = w.num_requests();
  m.prompt_tokens = w.prompt_tokens();
  const size_t num_first = w.requests.size();
  std::vector<RequestTimes> times(static_cast<size_t>(m.num_requests));
  const bool late_workload = !w.late_requests.empty();
  bool late_pending = late_workload;
  double late_added_s = -1;
  int64_t output_seen = 0;  // Σ completion tokens so far (progress)
  executor_.take_steps();

  const auto start = Clock::now();
  m.clock_start_s = std::chrono::duration<double>(start.time_since_epoch()).count();
  LLMEngine engine(engine_, executor_, tokenizer_);
  add_requests(engine, w.name, w.requests, 0);
  // Request `id` has `count` completion tokens after the step that ended at now_s.
  const auto saw_tokens = [&](int64_t id, int64_t count, double now_s) {
    RequestTimes& t = times[static_cast<size_t>(id)];
    if (count <= t.tokens) return;
    output_seen += count - t.tokens;
    if (t.first < 0) t.first = now_s;
    t.last = now_s;
    t.tokens = count;
    if (late_workload && static_cast<size_t>(id) < num_first) t.token_times.push_back(now_s);
  };
  while (!engine.is_finished() || late_pending) {
    if (interrupt_requested()) throw std::runtime_error("interrupted");
    throw_if_stopped();
    // The late requests arrive once every first request has late_after_tokens tokens (or has
    // finished; so the engine is never finished while they wait).
    if (late_pending &&
        std::all_of(
            times.begin(), times.begin() + static_cast<std::ptrdiff_t>(num_first),
            [&](const RequestTimes& t) { return t.finished || t.tokens >= w.late_after_tokens; })) {
      late_added_s = seconds_since(start);
      add_requests(engine, w.name, w.late_requests, static_cast<int64_t>(num_first));
      for (size_t i = num_first; i < times.size(); ++i) times[i].arrival = late_added_s;
      late_pending = false;
    }
    const EngineStats before = engine.stats();
    const int64_t output_before = output_seen;
    const auto step_start = Clock::now();
    const std::vector<RequestOutput> finished = engine.step();
    const double step_s = seconds_since(step_start), now_s = seconds_since(start);
    const EngineStats& after = engine.stats();
    // Any prompt token computed makes it a prefill step (a mixed chunked step included).
    const bool prefill = after.num_prefill_steps > before.num_prefill_steps ||
                         after.num_prefill_tokens > before.num_prefill_tokens;
    (prefill ? m.prefill_s : m.decode_s) += step_s;
    if (!prefill) m.decode_tokens += after.num_decode_tokens - before.num_decode_tokens;
    // Sequences still running that got a token (finished ones below).
    for (const Sequence* seq : engine.scheduler().running())
      saw_tokens(seq->seq_id, seq->num_completion_tokens(), now_s);
    for (const RequestOutput& out : finished) {
      const auto count = static_cast<int64_t>(out.completion_token_ids.size());
      saw_tokens(out.seq_id, count, now_s);
      RequestTimes& t = times[static_cast<size_t>(out.seq_id)];
      if (t.first < 0) t.first = now_s;  // no completion token at all
      t.last = now_s;
      t.finished = true;
      m.output_tokens += count;
      m.cached_tokens += out.num_cached_tokens;
    }
    if (progress != nullptr)
      progress->step(prefill, step_s,
                     after.num_prefill_tokens + after.num_cached_tokens -
                         before.num_prefill_tokens - before.num_cached_tokens,
                     output_seen - output_before, static_cast<int64_t>(finished.size()));
  }
  m.elapsed_s = seconds_since(start);

  const EngineStats& stats = engine.stats();
  m.prefill_tokens = stats.num_prefill_tokens;
  m.num_steps = stats.num_steps;
  int64_t tpot_requests = 0;
  for (const RequestTimes& t : times) {
    m.ttft_ms += 1e3 * (t.first - t.arrival) / static_cast<double>(times.size());
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
  if (late_workload) m.interference = interference_of(times, num_first, late_added_s);
  if (w.count_prefill_flops) {
    const std::optional<ModelShape> shape = limit_ ? std::optional(limit_->model) : shape_;
    if (shape) {
      std::vector<int64_t> lens;
      for (const auto* list : {&w.requests, &w.late_requests})
        for (const BenchRequest& r : *list) lens.push_back(static_cast<int64_t>(r.prompt.size()));
      m.flop_count = prefill_flops(*shape, lens);
      if (limit_ && m.prefill_s > 0)
        m.prefill_flop_pct =
            100.0 * (*m.flop_count / limit_->tp) / limit_->machine.bf16_flop_per_s / m.prefill_s;
    }
  }
  return m;
}

}  // namespace nanovllm::bench
