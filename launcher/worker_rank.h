// A rank >= 1 of one tensor-parallel group: joins the group (NCCL through the rendezvous on
// CUDA, the shared-memory all-reduce on the CPU), loads its shard of the model and executes
// rank 0's step commands from the ring until EXIT. The body of nanovllm-launch's forked
// workers (launcher/rank_groups.cpp) and of the nanovllm-worker processes the C library
// spawns (launcher/worker_main.cpp), over the same segment layout (launcher/group_segment.h).
#pragma once

#include <cstddef>

#include "launcher/run_segment.h"
#include "launcher/run_settings.h"

namespace nanovllm {

// Returns the process's exit code (0: EXIT received, or rank 0 had nothing to run). Stop
// signals are ignored once the model is loaded: rank 0 ends the loop.
int run_worker_rank(const RunSettings& s, const RunSegmentLayout& layout,
                    const ReplicaRegion& region, int rank);

}  // namespace nanovllm
