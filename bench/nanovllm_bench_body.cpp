#include "bench/nanovllm_bench_body.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_decode_step.h"
#include "bench/nanovllm_bench_plan.h"
#include "bench/nanovllm_bench_progress.h"
#include "bench/nanovllm_bench_report.h"
#include "bench/nanovllm_bench_runner.h"
#include "bench/nanovllm_bench_settings_json.h"
#include "bench/nanovllm_bench_stop.h"
#include "engine/sampling_defaults.h"
#include "engine/tokenizer.h"
#include "kernels/kv_cache.h"

namespace nanovllm::bench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void write_json(const std::filesystem::path& path, const json& j) {
  const std::filesystem::path tmp = path.string() + ".part";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);  // the reader never sees half a file
}

// `stage_` says what it was doing when the parent asked it to stop.
class BenchBody {
 public:
  BenchBody(const BenchOptions& o, const RunSettings& s, const ReplicaRole& role)
      : o_(o), s_(s), role_(role) {}

  int run(const ExecutorFactory& load_model, const std::filesystem::path& json_path) {
    try {
      measure(load_model);
    } catch (const BenchStopped& e) {
      std::fprintf(stderr, "nanovllm-bench: the %s benchmark process stopped (%s) while %s\n",
                   who().c_str(), describe_stop(e.signal).c_str(), stage_.c_str());
      std::fflush(stderr);
      if (executor_) executor_->execute(StepCommand{});  // EXIT: the worker ranks leave
      return kExitInterrupted;
    }
    write_json(json_path, r_);
    return 0;
  }

 private:
  bool replicated() const { return role_.replicas > 1; }
  // "--tp 2", or "--tp 2 --dp 4 (replica 1)".
  std::string who() const {
    std::string s = "--tp " + std::to_string(s_.tp_size);
    if (replicated())
      s += " --dp " + std::to_string(role_.replicas) + " (replica " +
           std::to_string(role_.replica) + ")";
    return s;
  }
  // With replicas: every one of them reaches this point before any goes on.
  void meet_replicas(const std::string& what) {
    if (!replicated()) return;
    stage_ = "waiting for the other replicas before " + what;
    const double waited = role_.barrier->arrive_and_wait(role_.replica, what);
    spdlog::debug("waited {:.3f} s for the other replicas before {}", waited, what);
  }
  void measure(const ExecutorFactory& load_model);
  void run_workloads(BenchRunner& runner, const EngineConfig& engine);
  void measure_decode_steps(const EngineConfig& engine, const std::optional<LimitSetup>& limit);

  const BenchOptions& o_;
  const RunSettings& s_;
  ReplicaRole role_;
  std::optional<StepRecorder> executor_;
  std::string stage_ = "starting";
  json r_;
};

void BenchBody::measure(const ExecutorFactory& load_model) {
  json& startup = r_["startup"];
  const bool cuda = s_.device == Device::kCuda;
  std::optional<MachineLimits> machine;
  startup["machine_limits_s"] = nullptr;
  if (cuda) {  // before the model takes the GPU's memory and clocks settle on its work
    stage_ = "measuring the machine's limits";
    const auto t = Clock::now();
    machine = measure_machine_limits();
    startup["machine_limits_s"] = seconds_since(t);
    spdlog::info("machine limits: {}, {:.0f} GB/s copy, {:.0f} TFLOP/s bf16", machine->device,
                 machine->copy_bytes_per_s / 1e9, machine->bf16_flop_per_s / 1e12);
  }
  throw_if_stopped();
  stage_ = "loading the model";
  const auto load_start = Clock::now();
  executor_.emplace(load_model());
  StepRecorder& executor = *executor_;
  startup["load_s"] = seconds_since(load_start);
  const std::optional<StartupTiming> parts = executor.startup_timing();
  startup["weights_s"] = parts ? json(parts->load_s) : json(nullptr);
  startup["warmup_s"] = parts ? json(parts->warmup_s) : json(nullptr);
  startup["graph_capture_s"] = parts ? json(parts->graph_capture_s) : json(nullptr);

  EngineConfig engine = s_.job.engine;
  engine.num_kvcache_blocks = executor.num_kv_blocks();
  if (const std::string why = kv_cache_shortfall(engine.num_kvcache_blocks,
                                                 engine.kvcache_block_size, engine.max_model_len);
      !why.empty())
    spdlog::warn("{}", why);
  if (!executor.set_step_timing(true)) spdlog::info("no step timing on this backend (CUDA events)");
  const ModelShape shape = model_shape(s_.model);
  std::optional<LimitSetup> limit;
  if (machine)
    limit = LimitSetup{shape, s_.tp_size, *machine,
                       kv_cache_bytes_per_value(kernels::kv_cache_has_row_scales(s_.kv_cache_dtype),
                                                shape.head_dim)};
  // Stop strings need the completions' text.
  std::optional<Tokenizer> tokenizer;
  if (!o_.stop.empty())
    tokenizer.emplace(Tokenizer::from_file((o_.model / "tokenizer.json").string()));
  BenchRunner runner(executor, engine, limit, tokenizer ? &*tokenizer : nullptr);
  stage_ = "running the warm-up request";
  startup["warmup_request_s"] = runner.warm_up(o_.token_scale);
  runner.set_model_shape(shape);

  run_workloads(runner, engine);
  meet_replicas("the decode step");  // every replica's runs ended: replica 0 measures alone
  measure_decode_steps(engine, limit);
  stage_ = "finishing";
  executor.execute(StepCommand{});  // EXIT: the worker ranks leave their loops

  r_["machine"] = machine_json(machine);
  r_["model"] = model_json(model_name(s_.model_dir), shape);
  r_["tp"] = s_.tp_size;
  r_["dp"] = role_.replicas;
  if (replicated()) r_["replica"] = role_.replica;
  r_["device"] = cuda ? "cuda" : "cpu";
  r_["runs"] = o_.runs;
  r_["sampling"] = sampling_json(o_);
  r_["engine"] = engine_json(engine, s_);
}

void BenchBody::run_workloads(BenchRunner& runner, const EngineConfig& engine) {
  const std::vector<Workload> workloads = make_workloads(o_, s_.model.vocab_size);
  const BenchPlan plan = make_plan(workloads, o_.runs, engine.max_model_len);
  // The replicas run in step: replica 0's progress stands for all of them.
  std::optional<BenchProgress> progress;
  if (role_.replica == 0) progress.emplace(plan);
  r_["workloads"] = json::array();
  for (size_t k = 0; k < workloads.size(); ++k) {
    const Workload& w = workloads[k];
    if (!plan.workloads[k].skipped.empty()) {
      spdlog::warn("{}: skipped: {}", w.name, plan.workloads[k].skipped);
      continue;
    }
    std::vector<RunMeasure> runs;
    for (int i = 1; i <= o_.runs; ++i) {
      const std::string run_name =
          w.name + " run " + std::to_string(i) + "/" + std::to_string(o_.runs);
      meet_replicas(run_name);
      stage_ =
          "running " + w.name + " (run " + std::to_string(i) + "/" + std::to_string(o_.runs) + ")";
      if (progress) progress->begin_run(w.name, i);
      runs.push_back(runner.run(w, progress ? &*progress : nullptr));
      const RunMeasure& m = runs.back();
      spdlog::info("{} run {}/{}: {} requests, {} output tokens in {:.3f} s: {:.1f} output tok/s",
                   w.name, i, o_.runs, m.num_requests, m.output_tokens, m.elapsed_s,
                   static_cast<double>(m.output_tokens) / m.elapsed_s);
      if (progress) progress->end_run(m.elapsed_s);
    }
    json& entry = r_["workloads"].emplace_back(workload_json(w, runs));
    if (w.count_prefill_flops || !w.late_requests.empty())
      entry["chunking"] = chunking_json(engine);
    if (replicated()) {  // each run on the machine's one clock, for the aggregate
      entry["run_clocks"] = json::array();
      for (const RunMeasure& m : runs)
        entry["run_clocks"].push_back({m.clock_start_s, m.clock_start_s + m.elapsed_s});
    }
    const double spread = entry["spread_pct"].get<double>();
    if (spread > kSpreadWarnPct)
      spdlog::warn(
          "{}: the runs spread {:.1f}% (over {:.0f}%): the machine is not quiet, or use more "
          "--runs",
          w.name, spread, kSpreadWarnPct);
  }
}

// decode_step: the first batch size's entry; decode_steps: every size's, in order.
void BenchBody::measure_decode_steps(const EngineConfig& engine,
                                     const std::optional<LimitSetup>& limit) {
  r_["decode_step"] = nullptr;
  if (!o_.runs_workload("decode-step")) return;
  if (s_.device != Device::kCuda) {
    spdlog::info("decode step: CUDA only (null on the CPU backend)");
    return;
  }
  if (role_.replica != 0) return;  // one replica's step: replica 0's stands for all
  r_["decode_steps"] = json::array();
  for (const int batch : o_.decode_batches) {
    throw_if_stopped();
    stage_ = "measuring the decode step at batch " + std::to_string(batch);
    DecodeStepSetup setup{batch, o_.decode_context, s_.model.vocab_size,
                          load_generation_config(o_.model), Device::kCuda};
    r_["decode_steps"].push_back(measure_decode_step(*executor_, engine, setup, limit));
  }
  r_["decode_step"] = r_["decode_steps"].front();
}

}  // namespace

int run_bench_body(const BenchOptions& options, const RunSettings& settings,
                   const std::filesystem::path& json_path, const ExecutorFactory& load_model,
                   const ReplicaRole& role) {
  // However the body ends, a replica waiting for this one at the barrier must not wait on.
  struct LeaveOnExit {
    const ReplicaRole& role;
    ~LeaveOnExit() {
      if (role.barrier != nullptr) role.barrier->leave(role.replica);
    }
  } leave{role};
  return BenchBody(options, settings, role).run(load_model, json_path);
}

}  // namespace nanovllm::bench
