#include "ipc/process_mutex.h"

#include <cerrno>
#include <cstring>

#include "kernels/check.h"

namespace nanovllm {

void process_mutex_init(ProcessMutex* m) {
  pthread_mutexattr_t attr;
  CHECK_EQ(::pthread_mutexattr_init(&attr), 0);
  CHECK_EQ(::pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED), 0);
  CHECK_EQ(::pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST), 0);
  const int rc = ::pthread_mutex_init(&m->mutex, &attr);
  ::pthread_mutexattr_destroy(&attr);
  CHECK_MSG(rc == 0, "pthread_mutex_init: " << std::strerror(rc));
}

ProcessLock::ProcessLock(ProcessMutex& m) : m_(m) {
  const int rc = ::pthread_mutex_lock(&m_.mutex);
  // A holder died: the state it guarded (a line being appended) needs no repair to go on.
  if (rc == EOWNERDEAD) ::pthread_mutex_consistent(&m_.mutex);
  CHECK_MSG(rc == 0 || rc == EOWNERDEAD, "pthread_mutex_lock: " << std::strerror(rc));
}

ProcessLock::~ProcessLock() {
  ::pthread_mutex_unlock(&m_.mutex);
}

}  // namespace nanovllm
