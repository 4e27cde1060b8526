// Is a peer process still there? Used by every bounded wait in ipc/ between two wake-ups.
#pragma once

#include <sys/types.h>

namespace nanovllm {

// True while `pid` exists and has not exited. A zombie (exited, not yet reaped by its parent)
// counts as dead: a sibling rank that crashed stays a zombie until the launcher reaps it.
// pid <= 0 is "no process" and returns false.
bool process_alive(pid_t pid);

// In a process forked by `launcher_pid`: throws IpcError once the launcher is gone (we were
// re-parented). In the launcher itself, or when launcher_pid <= 0, does nothing.
void check_launcher_alive(pid_t launcher_pid);

}  // namespace nanovllm
