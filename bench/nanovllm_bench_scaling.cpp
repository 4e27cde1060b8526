#include "bench/nanovllm_bench_scaling.h"

#include <spdlog/fmt/fmt.h>

#include <string>

#include "bench/nanovllm_bench_report.h"

namespace nanovllm::bench {

using nlohmann::json;

json scaling_json(const std::vector<json>& per_tp) {
  json out = json::array();
  const json& base = per_tp.front();
  const auto gpus = [](const json& r) { return r["tp"].get<double>() * r.value("dp", 1); };
  for (size_t w = 0; w < base.at("workloads").size(); ++w) {
    json row{{"workload", base["workloads"][w]["name"]},
             {"tp", json::array()},
             {"dp", json::array()},
             {"output_tok_s", json::array()},
             {"pct_of_limit", json::array()},
             {"speedup", json::array()},
             {"efficiency_pct", json::array()}};
    const json base_rate = optional_field(base["workloads"][w].at("median"), "output_tok_s");
    for (const json& r : per_tp) {
      const json& median = r.at("workloads").at(w).at("median");
      const json rate_here = optional_field(median, "output_tok_s");
      const bool ok = rate_here.is_number() && base_rate.is_number() && base_rate.get<double>() > 0;
      const json speedup =
          ok ? json(rate_here.get<double>() / base_rate.get<double>()) : json(nullptr);
      row["tp"].push_back(r.at("tp"));
      row["dp"].push_back(r.value("dp", 1));
      row["output_tok_s"].push_back(rate_here);
      row["pct_of_limit"].push_back(optional_field(median, "pct_of_limit"));
      row["speedup"].push_back(speedup);
      row["efficiency_pct"].push_back(
          ok ? json(100.0 * speedup.get<double>() / (gpus(r) / gpus(base))) : json(nullptr));
    }
    out.push_back(row);
  }
  return out;
}

void print_scaling(std::FILE* out, const json& scaling) {
  fmt::print(out,
             "\nscaling over the configurations (medians; ratio vs the first configuration, "
             "efficiency = ratio / its share of GPUs; dp N: every replica ran the whole "
             "workload, work xN):\n");
  fmt::print(out, "{:<16}{:>4}{:>4}{:>6}{:>12}{:>9}{:>9}{:>7}\n", "workload", "tp", "dp", "GPUs",
             "out t/s", "% limit", "ratio", "eff %");
  for (const json& row : scaling)
    for (size_t i = 0; i < row["tp"].size(); ++i) {
      const int tp = row["tp"][i].get<int>();
      // Older files have neither dp nor pct_of_limit here.
      const int dp = row.contains("dp") ? row["dp"][i].get<int>() : 1;
      const json pct = row.contains("pct_of_limit") ? row["pct_of_limit"][i] : json(nullptr);
      fmt::print(out, "{:<16}{:>4}{:>4}{:>6}{:>12}{:>9}{:>9}{:>7}\n",
                 i == 0 ? row["workload"].get<std::string>() : "", tp, dp, tp * dp,
                 table_number(row["output_tok_s"][i], 1), table_number(pct, 1),
                 table_number(row["speedup"][i], 2) + "x",
                 table_number(row["efficiency_pct"][i], 0));
    }
}

}  // namespace nanovllm::bench
