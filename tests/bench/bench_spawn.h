// Starting a nanovllm-bench binary from a test without waiting for it, and finding the
// processes it left: the tests of its stop signals and of an installed copy.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nanovllm::testing {

struct BenchSpawn {
  std::vector<std::string> args;                                        // argv, the binary first
  std::string out, err;                                                 // files for stdout, stderr
  std::string cwd;                                                      // empty: the test's
  std::vector<std::pair<std::string, std::optional<std::string>>> env;  // nullopt: unset
};

// `bench` on the tiny model on the CPU with the small engine every spawning test uses, writing
// `json`, then `workload_args` (the workload flags).
inline std::vector<std::string> tiny_cpu_bench_args(const std::string& bench,
                                                    const std::string& model,
                                                    const std::string& json,
                                                    const std::vector<std::string>& workload_args) {
  std::vector<std::string> args = {bench,
                                   model,
                                   "--json",
                                   json,
                                   "--device=cpu",
                                   "--max-model-len=256",
                                   "--max-num-batched-tokens=256",
                                   "--max-num-seqs=16",
                                   "--block-size=16",
                                   "--num-gpu-blocks-override=96"};
  args.insert(args.end(), workload_args.begin(), workload_args.end());
  return args;
}

// Forks and execs `s`; returns the pid (the child exits 126/127 when it cannot start).
inline pid_t spawn_bench(const BenchSpawn& s) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::dup2(::open(s.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
  ::dup2(::open(s.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
  for (const auto& [name, value] : s.env) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  if (!s.cwd.empty() && ::chdir(s.cwd.c_str()) != 0) ::_exit(126);
  std::vector<std::string> args = s.args;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

// Every live process (zombies are gone) whose command line holds `needle`, but this one.
inline std::vector<pid_t> processes_with(const std::string& needle) {
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    std::ifstream cmd(dir + "/cmdline");
    const std::string cmdline((std::istreambuf_iterator<char>(cmd)), {});
    if (cmdline.find(needle) == std::string::npos) continue;
    std::ifstream stat(dir + "/stat");
    const std::string text((std::istreambuf_iterator<char>(stat)), {});
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z') continue;
    found.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return found;
}

}  // namespace nanovllm::testing
