#include "ipc/liveness.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <string>

#include "ipc/ipc_error.h"

namespace nanovllm {

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  // kill() also succeeds for zombies; /proc/<pid>/stat field 3 is the state letter.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;  // no procfs: trust kill()
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');  // the command name may contain spaces and ')'
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

void check_launcher_alive(pid_t launcher_pid) {
  if (launcher_pid <= 0 || ::getpid() == launcher_pid) return;
  if (::getppid() != launcher_pid)
    throw IpcError("the launcher (pid " + std::to_string(launcher_pid) +
                   ") is gone; this rank stops");
}

}  // namespace nanovllm
