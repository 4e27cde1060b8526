#include "bench/nanovllm_bench_data.h"

#include <cstdlib>
#include <system_error>

#ifndef NANOVLLM_SOURCE_DIR
#define NANOVLLM_SOURCE_DIR "."
#endif

namespace nanovllm::bench {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDataSubdir = "bench/data";
constexpr const char* kInstalledSubdir = "share/nanovllm/bench/data";  // under the prefix

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace

std::vector<fs::path> bench_data_dirs() {
  std::vector<fs::path> dirs;
  if (const auto dir = env("NANOVLLM_BENCH_DATA")) dirs.emplace_back(*dir);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.push_back((exe.parent_path() / ".." / kInstalledSubdir).lexically_normal());
  const fs::path cwd = fs::current_path(ec);
  dirs.push_back(ec ? fs::path(kDataSubdir) : cwd / kDataSubdir);
  dirs.push_back(fs::path(env("NANOVLLM_BENCH_SOURCE_DIR").value_or(NANOVLLM_SOURCE_DIR)) /
                 kDataSubdir);
  return dirs;
}

DataLookup find_bench_data(const std::string& file_name) {
  DataLookup lookup;
  for (const fs::path& dir : bench_data_dirs()) {
    lookup.tried.push_back(dir / file_name);
    std::error_code ec;
    if (fs::is_regular_file(lookup.tried.back(), ec)) {
      lookup.found = lookup.tried.back();
      break;
    }
  }
  return lookup;
}

std::string data_not_found_message(const std::string& file_name, const DataLookup& lookup) {
  std::string tried;
  for (const fs::path& p : lookup.tried) {
    if (!tried.empty()) tried += ", ";
    tried += p.string();
  }
  return "workload file " + file_name + " not found; tried: " + tried +
         " (pass --workload-file FILE, or set NANOVLLM_BENCH_DATA to the folder that holds it)";
}

}  // namespace nanovllm::bench
