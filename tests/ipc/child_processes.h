// Test helper: run a function in forked child processes and collect how each one ended.
// A child never returns into GoogleTest: it reports through its exit code (0 = all good) and
// prints what went wrong to stderr.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace nanovllm::testing {

// Forks one child per index and calls fn(index) there; an exception becomes exit code 99.
inline std::vector<pid_t> fork_children(int n, const std::function<int(int)>& fn) {
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 98;
      try {
        rc = fn(i);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", i, e.what());
        rc = 99;
      }
      std::fflush(nullptr);
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  return pids;
}

// Waits for every pid (SIGKILLing those still running after `limit`, so a hang fails the
// test instead of the suite); returns the raw wait statuses.
inline std::vector<int> wait_children(const std::vector<pid_t>& pids,
                                      std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> status(pids.size(), -1);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) continue;
      int st = 0;
      if (::waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        status[i] = st;
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (status[i] == -1) ::kill(pids[i], SIGKILL);
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return status;
}

inline bool exited_ok(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace nanovllm::testing
