// nanovllm-launch --data-parallel-size N: N engine replicas, each a group of --tp ranks on its
// own GPUs, answering one prompts file into one results file. The launcher reads and validates
// the requests (and applies --resume) once, before fork, so every replica inherits the same
// list; it writes the error results of bad lines itself, then the replicas claim the rest
// through the run's segment as they have room (engine/job/replica_link.h) and append their
// lines under one process-shared lock. The launcher draws the one progress line and summary
// (launcher/replica_progress.h); stop signals, the stall watchdog and a failed rank behave as
// with one replica, the failed rank named with its replica.
#pragma once

#include <spdlog/common.h>

#include "launcher/run_settings.h"
#include "launcher/stall_watchdog.h"

namespace nanovllm {

// Exit codes as nanovllm-launch's (launcher/launch_main.cpp).
int run_data_parallel(const RunSettings& settings, spdlog::level::level_enum log_level,
                      const StallPolicy& stall);

}  // namespace nanovllm
