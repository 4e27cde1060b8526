#include "bench/nanovllm_bench_merge.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "bench/nanovllm_bench_report.h"

namespace nanovllm::bench {

using nlohmann::json;

namespace {

// Σ over the replicas of run[key] (null when any has null).
json sum_of(const std::vector<const json*>& runs, const char* key) {
  double sum = 0;
  bool integers = true;
  for (const json* r : runs) {
    if (!r->at(key).is_number()) return nullptr;
    integers = integers && r->at(key).is_number_integer();
    sum += r->at(key).get<double>();
  }
  return integers ? json(static_cast<int64_t>(sum)) : json(sum);
}

json max_of(const std::vector<const json*>& values) {
  double best = -std::numeric_limits<double>::infinity();
  for (const json* v : values) {
    if (!v->is_number()) return nullptr;
    best = std::max(best, v->get<double>());
  }
  return best;
}

json mean_of(const std::vector<const json*>& runs, const char* key) {
  const json sum = sum_of(runs, key);
  return sum.is_number() ? json(sum.get<double>() / static_cast<double>(runs.size())) : sum;
}

json rate(double amount, double seconds) {
  return seconds > 0 ? json(amount / seconds) : json(nullptr);
}

// Run `i` of workload `w` over the replicas (the header's rules). Every key of a RUN is kept,
// null where the replicas' figures do not add up to one.
json merged_run(const std::vector<const json*>& entries, size_t i) {
  std::vector<const json*> runs, limits;
  double start = std::numeric_limits<double>::infinity(), end = -start;
  for (const json* e : entries) {
    runs.push_back(&e->at("runs").at(i));
    limits.push_back(&runs.back()->at("limit_s"));
    const json& clock = e->at("run_clocks").at(i);
    start = std::min(start, clock.at(0).get<double>());
    end = std::max(end, clock.at(1).get<double>());
  }
  json m;
  for (const auto& [key, value] : runs.front()->items()) m[key] = nullptr;
  const double elapsed = end - start;
  const json out = sum_of(runs, "output_tokens");
  double requests = 0, prompt = 0;
  for (const json* e : entries) {
    requests += e->at("num_requests").get<double>();
    prompt += e->at("prompt_tokens").get<double>();
  }
  m["elapsed_s"] = elapsed;
  m["requests_per_s"] = rate(requests, elapsed);
  m["total_tok_s"] = rate(prompt + out.get<double>(), elapsed);
  m["output_tok_s"] = rate(out.get<double>(), elapsed);
  m["output_tokens"] = out;
  m["cached_tokens"] = sum_of(runs, "cached_tokens");
  m["num_steps"] = sum_of(runs, "num_steps");
  m["limit_s"] = max_of(limits);
  m["pct_of_limit"] = m["limit_s"].is_number() && elapsed > 0
                          ? json(100.0 * m["limit_s"].get<double>() / elapsed)
                          : json(nullptr);
  m["ttft_ms"] = mean_of(runs, "ttft_ms");
  m["tpot_ms"] = mean_of(runs, "tpot_ms");
  m["flop_count"] = sum_of(runs, "flop_count");
  return m;
}

json merged_workload(const std::vector<const json*>& entries) {
  const json& first = *entries.front();
  json w = first;  // name, kind, shape, chunking, limit_breakdown_s: replica 0's
  w.erase("run_clocks");
  for (const char* key :
       {"num_requests", "prompt_tokens", "max_output_tokens", "output_tokens", "cached_tokens"}) {
    int64_t sum = 0;
    for (const json* e : entries) sum += e->at(key).get<int64_t>();
    w[key] = sum;
  }
  const size_t num_runs = first.at("runs").size();
  w["runs"] = json::array();
  for (size_t i = 0; i < num_runs; ++i) w["runs"].push_back(merged_run(entries, i));
  w["median"] = median_run(w["runs"]);
  w["spread_pct"] = spread_pct(w["runs"]);
  w["flop_count"] = w["median"]["flop_count"];
  w["prefill_flop_pct"] = nullptr;  // a share of one replica's prefill steps: per replica
  if (w.value("interference", json(nullptr)).is_object()) w["interference"] = nullptr;
  w["replicas"] = json::array();
  for (const json* e : entries) w["replicas"].push_back(*e);
  return w;
}

}  // namespace

json merge_replica_results(const std::vector<json>& replicas) {
  if (replicas.empty()) throw std::runtime_error("no replica results to merge");
  json out = replicas.front();
  out.erase("replica");
  out["dp"] = static_cast<int>(replicas.size());
  json& startup = out["startup"];
  for (auto it = startup.begin(); it != startup.end(); ++it) {
    std::vector<const json*> values;
    for (const json& r : replicas) values.push_back(&r.at("startup").at(it.key()));
    it.value() = max_of(values);
  }
  const size_t num_workloads = out.at("workloads").size();
  for (const json& r : replicas)
    if (r.at("workloads").size() != num_workloads)
      throw std::runtime_error("the replicas ran different workloads (" +
                               std::to_string(num_workloads) + " vs " +
                               std::to_string(r.at("workloads").size()) + ")");
  for (size_t w = 0; w < num_workloads; ++w) {
    std::vector<const json*> entries;
    for (const json& r : replicas) {
      const json& e = r.at("workloads").at(w);
      if (e.at("name") != out["workloads"][w]["name"] ||
          e.at("runs").size() != out["workloads"][w]["runs"].size())
        throw std::runtime_error("the replicas' runs of " + e.at("name").get<std::string>() +
                                 " do not match");
      entries.push_back(&e);
    }
    out["workloads"][w] = merged_workload(entries);
  }
  return out;
}

}  // namespace nanovllm::bench
