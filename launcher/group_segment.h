// The shared-memory segment of a run of tensor-parallel groups, from the run's settings: the
// step ring's sizing, the layout (launcher/run_segment.h) and each replica's regions set up
// before any rank attaches. nanovllm-launch's supervisor (launcher/rank_groups.cpp) and the C
// library's worker group (launcher/worker_group.cpp) create it; nanovllm-worker maps it with
// the same layout.
#pragma once

#include "ipc/step_ring_sizing.h"
#include "launcher/run_segment.h"
#include "launcher/run_settings.h"

namespace nanovllm {

// The step ring every group's rank 0 writes (one reader per other rank).
RingConfig run_ring_config(const RunSettings& s);

// `replicas` groups of s.tp_size ranks; a group of one rank has no ring, staging area or
// rendezvous.
RunSegmentLayout run_layout(const RunSettings& s, int replicas);

// Lays out every replica's ring, shared-memory all-reduce and rendezvous in a segment that
// init_run_segment constructed (nothing for groups of one rank).
void init_group_regions(const RunSegment& segment, const RunSegmentLayout& layout,
                        const RunSettings& s);

}  // namespace nanovllm
