#include "bench/nanovllm_bench_child.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "bench/nanovllm_bench_decode_step.h"
#include "bench/nanovllm_bench_report.h"
#include "bench/nanovllm_bench_runner.h"
#include "engine/sampling_defaults.h"
#include "engine/tokenizer.h"
#include "launcher/logging.h"
#include "launcher/rank_processes.h"
#include "launcher/run_settings.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

json opt(const auto& v) {
  return v ? json(*v) : json(nullptr);
}

json sampling_json(const BenchOptions& o) {
  const SamplingOverrides& f = o.sampling_flags;
  const SamplingOverrides d = sampling_choice(o).model_defaults;
  return {{"mode", o.sampling == SamplingMode::kModelDefaults ? "model-defaults" : "workload"},
          {"model_defaults",
           {{"temperature", opt(d.temperature)},
            {"top_k", opt(d.top_k)},
            {"top_p", opt(d.top_p)},
            {"min_p", opt(d.min_p)}}},
          {"flags",
           {{"temperature", opt(f.temperature)},
            {"top_k", opt(f.top_k)},
            {"top_p", opt(f.top_p)},
            {"min_p", opt(f.min_p)},
            {"seed", opt(f.seed)}}},
          {"stop", o.stop},
          {"logprobs", opt(o.logprobs)},
          {"presence_penalty", o.presence_penalty},
          {"frequency_penalty", o.frequency_penalty},
          {"repetition_penalty", o.repetition_penalty}};
}

// The chunked-prefill settings a run had (also in "engine").
json chunking_json(const EngineConfig& e) {
  return {{"enable_chunked_prefill", e.enable_chunked_prefill},
          {"long_prefill_token_threshold", e.long_prefill_token_threshold},
          {"chunked_step_mode", e.mixed_chunked_steps ? "mixed" : "alternating"},
          {"max_num_batched_tokens", e.max_num_batched_tokens}};
}

json engine_json(const EngineConfig& e, const RunSettings& s) {
  return {{"max_model_len", e.max_model_len},
          {"max_num_seqs", e.max_num_seqs},
          {"max_num_batched_tokens", e.max_num_batched_tokens},
          {"block_size", e.kvcache_block_size},
          {"num_kv_blocks", e.num_kvcache_blocks},
          {"enable_prefix_caching", e.enable_prefix_caching},
          {"enable_chunked_prefill", e.enable_chunked_prefill},
          {"long_prefill_token_threshold", e.long_prefill_token_threshold},
          {"chunked_step_mode", e.mixed_chunked_steps ? "mixed" : "alternating"},
          {"enforce_eager", s.enforce_eager}};
}

std::string model_name(const std::filesystem::path& dir) {
  const std::filesystem::path p = dir.lexically_normal();
  return (p.has_filename() ? p : p.parent_path()).filename().string();
}

void write_json(const std::filesystem::path& path, const json& j) {
  const std::filesystem::path tmp = path.string() + ".part";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);  // the orchestrator never reads half a file
}

int bench_rank0(const BenchOptions& o, const RunSettings& s, const ExecutorFactory& load_model) {
  json r;
  json& startup = r["startup"];
  const bool cuda = s.device == Device::kCuda;
  std::optional<MachineLimits> machine;
  startup["machine_limits_s"] = nullptr;
  if (cuda) {  // before the model takes the GPU's memory and clocks settle on its work
    const auto t = Clock::now();
    machine = measure_machine_limits();
    startup["machine_limits_s"] = seconds_since(t);
    spdlog::info("machine limits: {}, {:.0f} GB/s copy, {:.0f} TFLOP/s bf16", machine->device,
                 machine->copy_bytes_per_s / 1e9, machine->bf16_flop_per_s / 1e12);
  }
  const auto load_start = Clock::now();
  StepRecorder executor(load_model());
  startup["load_s"] = seconds_since(load_start);
  const std::optional<StartupTiming> parts = executor.startup_timing();
  startup["weights_s"] = parts ? json(parts->load_s) : json(nullptr);
  startup["warmup_s"] = parts ? json(parts->warmup_s) : json(nullptr);
  startup["graph_capture_s"] = parts ? json(parts->graph_capture_s) : json(nullptr);

  EngineConfig engine = s.job.engine;
  engine.num_kvcache_blocks = executor.num_kv_blocks();
  if (const std::string why = kv_cache_shortfall(engine.num_kvcache_blocks,
                                                 engine.kvcache_block_size, engine.max_model_len);
      !why.empty())
    spdlog::warn("{}", why);
  if (!executor.set_step_timing(true)) spdlog::info("no step timing on this backend (CUDA events)");
  const ModelShape shape = model_shape(s.model);
  std::optional<LimitSetup> limit;
  if (machine) limit = LimitSetup{shape, s.tp_size, *machine};
  // Stop strings need the completions' text.
  std::optional<Tokenizer> tokenizer;
  if (!o.stop.empty())
    tokenizer.emplace(Tokenizer::from_file((o.model / "tokenizer.json").string()));
  BenchRunner runner(executor, engine, limit, tokenizer ? &*tokenizer : nullptr);
  startup["warmup_request_s"] = runner.warm_up(o.token_scale);

  runner.set_model_shape(shape);

  r["workloads"] = json::array();
  for (const Workload& w : make_workloads(o, s.model.vocab_size)) {
    if (w.skip_when_too_long && w.longest_sequence() > engine.max_model_len) {
      spdlog::warn(
          "{}: skipped: a sequence needs {} tokens, the engine's max_model_len is {} (run with "
          "--max-model-len {} or more)",
          w.name, w.longest_sequence(), engine.max_model_len, w.longest_sequence());
      continue;
    }
    std::vector<RunMeasure> runs;
    for (int i = 1; i <= o.runs; ++i) {
      runs.push_back(runner.run(w));
      const RunMeasure& m = runs.back();
      spdlog::info("{} run {}/{}: {} requests, {} output tokens in {:.3f} s: {:.1f} output tok/s",
                   w.name, i, o.runs, m.num_requests, m.output_tokens, m.elapsed_s,
                   static_cast<double>(m.output_tokens) / m.elapsed_s);
    }
    r["workloads"].push_back(workload_json(w, runs));
    if (w.count_prefill_flops || !w.late_requests.empty())
      r["workloads"].back()["chunking"] = chunking_json(engine);
    const double spread = r["workloads"].back()["spread_pct"].get<double>();
    if (spread > kSpreadWarnPct)
      spdlog::warn(
          "{}: the runs spread {:.1f}% (over {:.0f}%): the machine is not quiet, or use more "
          "--runs",
          w.name, spread, kSpreadWarnPct);
  }
  // decode_step: the first batch size's entry; decode_steps: every size's, in order.
  r["decode_step"] = nullptr;
  if (o.runs_workload("decode-step")) {
    if (cuda) {
      r["decode_steps"] = json::array();
      for (const int batch : o.decode_batches) {
        DecodeStepSetup setup{batch, o.decode_context, s.model.vocab_size,
                              load_generation_config(o.model), Device::kCuda};
        r["decode_steps"].push_back(measure_decode_step(executor, engine, setup, limit));
      }
      r["decode_step"] = r["decode_steps"].front();
    } else {
      spdlog::info("decode step: CUDA only (null on the CPU backend)");
    }
  }
  executor.execute(StepCommand{});  // EXIT: the worker ranks leave their loops

  r["machine"] = machine_json(machine);
  r["model"] = model_json(model_name(s.model_dir), shape);
  r["tp"] = s.tp_size;
  r["device"] = cuda ? "cuda" : "cpu";
  r["runs"] = o.runs;
  r["sampling"] = sampling_json(o);
  r["engine"] = engine_json(engine, s);
  write_json(*o.child_json, r);
  return 0;
}

}  // namespace

int run_bench_child(const BenchOptions& o) {
  configure_logging(o.log_level, "bench tp " + std::to_string(o.child_tp));
  RunSettings settings;
  try {
    settings = make_run_settings(launch_options(o, o.child_tp));
    apply_engine_flags(o, settings.job.engine);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    return 1;
  }
  const Rank0Main body = [&](const ExecutorFactory& load_model) {
    return bench_rank0(o, settings, load_model);
  };
  if (settings.tp_size == 1) return run_single_process(settings, body);
  try {
    return run_rank_processes(settings, o.log_level, body);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm-bench: %s\n", e.what());
    return 1;
  }
}

}  // namespace nanovllm::bench
