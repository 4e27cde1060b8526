// Where nanovllm-bench finds its data files (bench/data/*.jsonl) when no --workload-file names
// one. The folders it tries, in order:
//   1. $NANOVLLM_BENCH_DATA, when set;
//   2. <folder of the executable>/../share/nanovllm/bench/data: an installed nanovllm-bench
//      (`cmake --install`, bench/CMakeLists.txt);
//   3. bench/data under the current directory: a checkout, or the GPU bundle run from one;
//   4. bench/data under the source tree it was built from ($NANOVLLM_BENCH_SOURCE_DIR, when
//      set, replaces the path baked in at build time).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm::bench {

inline constexpr const char* kWorkloadFileName = "nanovllm_workload.jsonl";

struct DataLookup {
  std::optional<std::filesystem::path> found;  // the first of `tried` that is a regular file
  std::vector<std::filesystem::path> tried;    // every candidate up to it (all when not found)
};

// The folders above, in order (the environment read now).
std::vector<std::filesystem::path> bench_data_dirs();
DataLookup find_bench_data(const std::string& file_name);

// "workload file nanovllm_workload.jsonl not found; tried: A, B, C (pass --workload-file FILE,
// or set NANOVLLM_BENCH_DATA to the folder that holds it)"
std::string data_not_found_message(const std::string& file_name, const DataLookup& lookup);

}  // namespace nanovllm::bench
