#include "bench/nanovllm_bench_report.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace nanovllm::bench {

using nlohmann::json;

namespace {

json rate(double amount, double seconds) {
  return seconds > 0 ? json(amount / seconds) : json(nullptr);
}

json or_null(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// OBJECT's KEY for the tables, "-" where it is null or missing.
std::string figure(const json& object, const char* key, int decimals) {
  return table_number(optional_field(object, key), decimals);
}

// One decode-step entry: its time against the limit, then its phases.
void print_decode_step(std::FILE* out, const json& d) {
  fmt::print(out,
             "\ndecode step (batch {}, context {}): {} ms (greedy {} ms, eager profiled {} ms), "
             "limit {} ms = {}% of limit\n",
             d["batch"].get<int>(), d["context"].get<int>(), figure(d, "step_ms", 3),
             figure(d, "greedy_step_ms", 3), figure(d, "eager_step_ms", 3),
             figure(d, "limit_ms", 3), figure(d, "pct_of_limit", 1));
  fmt::print(out,
             "  sampling cost {}%, host share {}%; phases (ms):", figure(d, "sampling_cost_pct", 1),
             figure(d, "host_share_pct", 1));
  const json phases = optional_field(d, "phases_ms");
  for (const char* phase :
       {"attention", "gemm", "elementwise", "all_reduce", "logits_gather", "sampling", "host"})
    fmt::print(out, " {} {}", phase,
               phases.is_object() ? figure(phases, phase, 3) : std::string("-"));
  fmt::print(out, "\n");
}

}  // namespace

json optional_field(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? json(nullptr) : *it;
}

std::string table_number(const json& v, int decimals) {
  if (!v.is_number()) return "-";
  return fmt::format("{:.{}f}", v.get<double>(), decimals);
}

json run_json(const RunMeasure& m) {
  json r;
  r["elapsed_s"] = m.elapsed_s;
  r["requests_per_s"] = rate(static_cast<double>(m.num_requests), m.elapsed_s);
  r["total_tok_s"] = rate(static_cast<double>(m.prompt_tokens + m.output_tokens), m.elapsed_s);
  r["output_tok_s"] = rate(static_cast<double>(m.output_tokens), m.elapsed_s);
  r["limit_s"] = or_null(m.limit_s);
  r["pct_of_limit"] = m.limit_s ? json(100.0 * *m.limit_s / m.elapsed_s) : json(nullptr);
  r["decode_limit_s"] = or_null(m.decode_limit_s);
  r["decode_pct_of_limit"] = m.decode_limit_s && m.decode_s > 0
                                 ? json(100.0 * *m.decode_limit_s / m.decode_s)
                                 : json(nullptr);
  r["gpu_s"] = or_null(m.gpu_s);
  r["prefill_s"] = m.prefill_s;
  r["decode_s"] = m.decode_s;
  r["prefill_tok_s"] = rate(static_cast<double>(m.prefill_tokens), m.prefill_s);  // S_PP
  r["decode_tok_s"] = rate(static_cast<double>(m.decode_tokens), m.decode_s);     // S_TG
  r["ttft_ms"] = m.ttft_ms;
  r["tpot_ms"] = m.tpot_ms;
  r["output_tokens"] = m.output_tokens;
  r["cached_tokens"] = m.cached_tokens;
  r["num_steps"] = m.num_steps;
  r["flop_count"] = or_null(m.flop_count);
  r["prefill_flop_pct"] = or_null(m.prefill_flop_pct);
  const std::optional<InterferenceMeasure>& im = m.interference;
  r["max_gap_ms"] = im ? json(im->max_gap_ms) : json(nullptr);
  r["baseline_max_gap_ms"] = im ? json(im->baseline_max_gap_ms) : json(nullptr);
  r["long_ttft_ms"] = im ? json(im->long_ttft_ms) : json(nullptr);
  return r;
}

json median_run(const json& runs) {
  json med = json::object();
  for (const auto& [key, first] : runs.front().items()) {
    std::vector<double> values;
    bool integers = true;  // counts stay integers where their median is one
    for (const json& r : runs) {
      if (r.at(key).is_number()) values.push_back(r.at(key).get<double>());
      integers = integers && r.at(key).is_number_integer();
    }
    if (values.size() != runs.size()) {
      med[key] = nullptr;
      continue;
    }
    const double m = median_of(values);
    med[key] = integers && m == std::floor(m) ? json(static_cast<int64_t>(m)) : json(m);
  }
  return med;
}

double spread_pct(const json& runs) {
  std::vector<double> v;
  for (const json& r : runs)
    v.push_back(r.at("output_tok_s").is_number() ? r.at("output_tok_s").get<double>() : 0.0);
  const double med = median_of(v);
  if (med <= 0) return 0;
  return 100.0 * (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) /
         med;
}

json workload_json(const Workload& w, const std::vector<RunMeasure>& runs) {
  json j;
  j["name"] = w.name;
  j["kind"] = w.kind;
  j["shape"] = w.shape;
  j["num_requests"] = w.num_requests();
  j["prompt_tokens"] = w.prompt_tokens();
  j["max_output_tokens"] = w.max_output_tokens();
  j["output_tokens"] = runs.front().output_tokens;
  j["cached_tokens"] = runs.front().cached_tokens;
  j["runs"] = json::array();
  for (const RunMeasure& m : runs) j["runs"].push_back(run_json(m));
  j["median"] = median_run(j["runs"]);
  j["spread_pct"] = spread_pct(j["runs"]);
  // long: the prompts' FLOPs and the median run's share of the BF16 rate in its prefill steps.
  j["flop_count"] = j["median"]["flop_count"];
  j["prefill_flop_pct"] = j["median"]["prefill_flop_pct"];
  // interference: the medians over the runs.
  j["interference"] = nullptr;
  if (runs.front().interference)
    j["interference"] = {{"max_gap_ms", j["median"]["max_gap_ms"]},
                         {"baseline_max_gap_ms", j["median"]["baseline_max_gap_ms"]},
                         {"long_ttft_ms", j["median"]["long_ttft_ms"]}};
  j["limit_breakdown_s"] = nullptr;
  if (!runs.front().limit_breakdown.empty()) {
    j["limit_breakdown_s"] = json::object();
    for (const OpCost& op : runs.front().limit_breakdown)
      j["limit_breakdown_s"][op.name] = op.seconds;
  }
  return j;
}

json machine_json(const std::optional<MachineLimits>& limits) {
  if (!limits)
    return {{"device", nullptr},
            {"sm_count", nullptr},
            {"copy_bandwidth_gbs", nullptr},
            {"bf16_tflops", nullptr}};
  return {{"device", limits->device},
          {"sm_count", limits->sm_count},
          {"copy_bandwidth_gbs", limits->copy_bytes_per_s / 1e9},
          {"bf16_tflops", limits->bf16_flop_per_s / 1e12}};
}

json model_json(const std::string& name, const ModelShape& m) {
  return {{"name", name},
          {"hidden_size", m.hidden_size},
          {"intermediate_size", m.intermediate_size},
          {"num_hidden_layers", m.num_hidden_layers},
          {"num_attention_heads", m.num_attention_heads},
          {"num_key_value_heads", m.num_key_value_heads},
          {"head_dim", m.head_dim},
          {"vocab_size", m.vocab_size},
          {"tie_word_embeddings", m.tie_word_embeddings}};
}

void print_result(std::FILE* out, const json& r) {
  const json& machine = r["machine"];
  const json& s = r["startup"];
  const int dp = r.value("dp", 1);
  fmt::print(out,
             "\nnanovllm-bench | model {} | {} | tp {}{} | sampling {} | prefix caching {} | {} "
             "run(s) each, medians\n",
             r["model"]["name"].get<std::string>(), r["device"].get<std::string>(),
             r["tp"].get<int>(), dp > 1 ? fmt::format(" | dp {}", dp) : "",
             r["sampling"]["mode"].get<std::string>(),
             r["engine"]["enable_prefix_caching"].get<bool>() ? "on" : "off", r["runs"].get<int>());
  if (optional_field(optional_field(r, "engine"), "all_reduce_knocked_out") == true)
    fmt::print(out,
               "ALL-REDUCES KNOCKED OUT (--knock-out-all-reduce): a timing experiment, the "
               "outputs are wrong; only the times beside a normal run's mean something\n");
  if (dp > 1)
    fmt::print(out,
               "work x{0}: each of the {0} replicas runs the whole workload, every run started "
               "together; a run's time is the earliest start to the latest end, its tokens and "
               "limit those of all {0} (S_PP, S_TG and TG %lim are per replica: the JSON's "
               "\"replicas\"; the decode step is replica 0's, measured alone)\n",
               dp);
  fmt::print(out,
             "start-up (not timed): machine limits {} s, model {} s (weights {} s, warm-up {} s, "
             "graph capture {} s), warm-up request {} s\n",
             figure(s, "machine_limits_s", 2), figure(s, "load_s", 2), figure(s, "weights_s", 2),
             figure(s, "warmup_s", 2), figure(s, "graph_capture_s", 2),
             figure(s, "warmup_request_s", 2));
  if (machine["device"].is_string())
    fmt::print(out, "machine: {}, {} GB/s copy, {} TFLOP/s bf16 (the limit's ceilings)\n",
               machine["device"].get<std::string>(), figure(machine, "copy_bandwidth_gbs", 0),
               figure(machine, "bf16_tflops", 0));
  else
    fmt::print(out, "machine: not measured (CPU backend): no limit, % of limit is '-'\n");
  fmt::print(
      out,
      "\n{:<16}{:>6}{:>10}{:>10}{:>9}{:>9}{:>11}{:>11}{:>11}{:>11}{:>9}{:>9}{:>9}{:>9}{:>9}{:>8}\n",
      "workload", "reqs", "in tok", "out tok", "time s", "req/s", "total t/s", "out t/s",
      "S_PP t/s", "S_TG t/s", "TTFT ms", "TPOT ms", "cached", "% limit", "TG %lim", "spread");
  for (const json& w : r["workloads"]) {
    const json& m = w["median"];
    const double spread = w["spread_pct"].get<double>();
    fmt::print(
        out,
        "{:<16}{:>6}{:>10}{:>10}{:>9}{:>9}{:>11}{:>11}{:>11}{:>11}{:>9}{:>9}{:>9}{:>9}{:>9}{:>8}\n",
        w["name"].get<std::string>(), w["num_requests"].get<int64_t>(),
        w["prompt_tokens"].get<int64_t>(), w["output_tokens"].get<int64_t>(),
        figure(m, "elapsed_s", 3), figure(m, "requests_per_s", 2), figure(m, "total_tok_s", 1),
        figure(m, "output_tok_s", 1), figure(m, "prefill_tok_s", 1), figure(m, "decode_tok_s", 1),
        figure(m, "ttft_ms", 1), figure(m, "tpot_ms", 2), figure(m, "cached_tokens", 0),
        figure(m, "pct_of_limit", 1), figure(m, "decode_pct_of_limit", 1),
        fmt::format("{:.1f}%{}", spread, spread > kSpreadWarnPct ? "!" : ""));
  }
  for (const json& w : r["workloads"]) {
    const json& m = w["median"];
    if (w.value("flop_count", json(nullptr)).is_number())
      fmt::print(out,
                 "\n{}: prefill {} prompt tok/s over {} s of prefill steps, {} TFLOP = {}% of "
                 "the BF16 rate\n",
                 w["name"].get<std::string>(), figure(m, "prefill_tok_s", 1),
                 figure(m, "prefill_s", 3),
                 table_number(json(w["flop_count"].get<double>() / 1e12), 1),
                 figure(w, "prefill_flop_pct", 1));
    const json im = w.value("interference", json(nullptr));
    if (im.is_object())
      fmt::print(out,
                 "\n{}: longest token gap of the running sequences {} ms while the late prompt "
                 "prefilled (baseline {} ms), its TTFT {} ms\n",
                 w["name"].get<std::string>(), figure(im, "max_gap_ms", 1),
                 figure(im, "baseline_max_gap_ms", 1), figure(im, "long_ttft_ms", 1));
  }
  const json& engine = r["engine"];
  if (engine.contains("enable_chunked_prefill"))
    fmt::print(out,
               "chunked prefill {} (long prefill threshold {}, {} steps), {} tokens per step\n",
               engine["enable_chunked_prefill"].get<bool>() ? "on" : "off",
               engine["long_prefill_token_threshold"].get<int>(),
               engine["chunked_step_mode"].get<std::string>(),
               engine["max_num_batched_tokens"].get<int>());
  // value(): a const json's operator[] on a missing key is undefined behaviour.
  if (!r.value("decode_step", json(nullptr)).is_object()) {
    fmt::print(out, "\ndecode step: - (measured on CUDA when --workloads has decode-step)\n");
    return;
  }
  // Older files hold only decode_step.
  const json steps =
      r.contains("decode_steps") ? r["decode_steps"] : json::array({r.at("decode_step")});
  for (const json& d : steps) print_decode_step(out, d);
}

}  // namespace nanovllm::bench
