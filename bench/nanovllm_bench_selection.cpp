#include "bench/nanovllm_bench_selection.h"

#include <algorithm>
#include <system_error>

#include "bench/nanovllm_bench_data.h"
#include "launcher/usage_error.h"

namespace nanovllm::bench {

namespace fs = std::filesystem;

namespace {

bool contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// In `all` on `device`: the nanovllm workload sized for it, and neither long one.
bool in_all(const std::string& name, Device device) {
  if (name == "long" || name == "interference") return false;
  if (name == "nanovllm") return device == Device::kCuda;
  if (name == "nanovllm-cpu") return device == Device::kCpu;
  return true;
}

}  // namespace

std::vector<std::string> workload_list(const std::vector<std::string>& given, Device device) {
  std::vector<std::string> out;
  const bool all = contains(given, "all");
  for (const char* name : kAllWorkloads)
    if ((all && in_all(name, device)) || contains(given, name)) out.emplace_back(name);
  for (const std::string& g : given)
    if (g != "all" && !contains(out, g))
      throw UsageError("--workloads: unknown workload '" + g +
                       "' (nanovllm, nanovllm-cpu, fixed, latency, shared-prefix, decode-step, "
                       "long, interference or all)");
  return out;
}

void apply_device_sizes(BenchOptions& o, const FlagGiven& given) {
  const CpuSizes cpu;
  o.cpu_max_requests = given("--max-requests") ? o.max_requests : cpu.nanovllm_requests;
  o.cpu_token_scale = given("--token-scale") ? o.token_scale : cpu.nanovllm_token_scale;
  if (o.device != Device::kCpu) return;
  const auto set = [&](const char* flag, auto& field, const auto& value) {
    if (!given(flag)) field = value;
  };
  set("--num-seqs", o.num_seqs, cpu.num_seqs);
  set("--input-len", o.input_len, cpu.input_len);
  set("--output-len", o.output_len, cpu.output_len);
  set("--prefix-requests", o.prefix_requests, cpu.prefix_requests);
  set("--prefix-len", o.prefix_len, cpu.prefix_len);
  set("--suffix-len", o.suffix_len, cpu.suffix_len);
  set("--prefix-output-len", o.prefix_output_len, cpu.prefix_output_len);
}

void resolve_workload_file(BenchOptions& o) {
  const bool needed = o.runs_workload("nanovllm") || o.runs_workload("nanovllm-cpu");
  std::error_code ec;
  if (!o.workload_file.empty()) {
    if (needed && !fs::is_regular_file(o.workload_file, ec))
      throw UsageError("--workload-file '" + o.workload_file.string() + "' not found");
    return;
  }
  const DataLookup lookup = find_bench_data(kWorkloadFileName);
  if (lookup.found) {
    o.workload_file = *lookup.found;
  } else if (needed) {
    throw UsageError(data_not_found_message(kWorkloadFileName, lookup));
  }
}

}  // namespace nanovllm::bench
