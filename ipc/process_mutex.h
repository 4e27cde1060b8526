// A mutex that lives in the run's shared-memory segment and excludes processes, not threads:
// the replicas of a data-parallel run take it around each result line they append to the one
// output. Robust: when a holder dies (kill -9 mid-line), the next locker gets it anyway, since
// the launcher is already tearing that run down and the others must not hang on it.
#pragma once

#include <pthread.h>

namespace nanovllm {

struct ProcessMutex {
  pthread_mutex_t mutex;
};

// Constructs the mutex in place (process-shared, robust) before fork; throws on failure.
void process_mutex_init(ProcessMutex* m);

// Holds `m` for its lifetime.
class ProcessLock {
 public:
  explicit ProcessLock(ProcessMutex& m);
  ~ProcessLock();
  ProcessLock(const ProcessLock&) = delete;
  ProcessLock& operator=(const ProcessLock&) = delete;

 private:
  ProcessMutex& m_;
};

}  // namespace nanovllm
