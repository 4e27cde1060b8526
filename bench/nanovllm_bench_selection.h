// Which workloads nanovllm-bench runs, and at what sizes, once the device is known.
//
// `all` (the default) is every workload but `long` and `interference` (1.29M prompt tokens;
// they need --max-model-len >= 33792 and 32016), with one difference per device: on CUDA it
// holds `nanovllm`, nano-vllm's whole workload (256 requests, 134k output tokens); on the CPU
// backend `nanovllm-cpu` instead, the same file cut to a CPU's size (its first 16 requests,
// prompts and max_tokens scaled by 1/8: about 1k prompt and 1k output tokens). `nanovllm` by
// name still runs the whole workload on the CPU.
//
// On the CPU the other workloads' sizes that the command line leaves unset become CpuSizes
// (fixed 1 and 8 sequences, 128 tokens in, 32 out; shared-prefix 8 requests of 256 + 16);
// on CUDA they stay BenchOptions' defaults. Flags given always win.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/nanovllm_bench_options.h"

namespace nanovllm::bench {

// The sizes of the workloads on the CPU backend where no flag sets them.
struct CpuSizes {
  int nanovllm_requests = 16;           // nanovllm-cpu: --max-requests
  double nanovllm_token_scale = 0.125;  // nanovllm-cpu: --token-scale
  std::vector<int> num_seqs{1, 8};
  int input_len = 128;
  int output_len = 32;
  int prefix_requests = 8;
  int prefix_len = 256;
  int suffix_len = 16;
  int prefix_output_len = 32;
};

// "all" and names of kAllWorkloads, expanded for `device` and returned in kAllWorkloads'
// order without repeats. Throws UsageError naming an unknown workload.
std::vector<std::string> workload_list(const std::vector<std::string>& given, Device device);

// Sets every size of `o` whose flag was not given (`given("--input-len")` false) to its
// CpuSizes value; on CUDA only nanovllm-cpu's (which --max-requests / --token-scale set too).
using FlagGiven = std::function<bool(const char* flag)>;
void apply_device_sizes(BenchOptions& o, const FlagGiven& given);

// The nanovllm workload file: --workload-file when given, else the first found by
// bench/nanovllm_bench_data.h. Throws UsageError naming every place tried when a workload
// that reads it is asked for and it is nowhere.
void resolve_workload_file(BenchOptions& o);

}  // namespace nanovllm::bench
