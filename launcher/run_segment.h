// The run's shared-memory segment as the launcher lays it out (ipc/README.md: the launcher
// decides the layout): the data-parallel part | step counters (one per process) | then, per
// replica, RunReport | ring region | communicator region | rendezvous region, each 64-byte
// aligned. One replica (no --data-parallel-size) is the tensor-parallel group alone. The
// reports, the counters and the data-parallel part are the launcher's own: what each
// replica's rank 0 tells it at the end, what the stall watchdog reads while the ranks run,
// and what the replicas share (engine/job/replica_link.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/job/replica_link.h"
#include "ipc/process_mutex.h"

namespace nanovllm {

// What a replica's rank 0 tells the launcher. Rank 0's process itself exits 0 when only some
// requests failed, since the supervisor reads any non-zero exit as a crash.
struct RunReport {
  std::atomic<int32_t> rank0_exit;           // the exit status rank 0 asks for
  std::atomic<int32_t> stop_signal;          // the job stopped on it (0: not); counts below
  std::atomic<int64_t> finished_results;     // result lines written
  std::atomic<int64_t> unfinished_requests;  // requests that got no result
};

struct RunSegmentLayout {
  int replicas = 1, tp_size = 1;
  size_t totals_offset = 0, counters_offset = 0;
  size_t replica_offset = 0, replica_stride = 0;  // replica d's region: offset + d * stride
  // Within a replica's region (the report is at its start):
  size_t ring_offset = 0, ring_bytes = 0, comm_offset = 0, comm_bytes = 0;
  size_t rendezvous_offset = 0, rendezvous_bytes = 0;
  size_t total = 0;
};
RunSegmentLayout run_segment_layout(int replicas, int tp_size, size_t ring_bytes, size_t comm_bytes,
                                    size_t rendezvous_bytes);

// One replica's parts of the mapped segment.
struct ReplicaRegion {
  RunReport* report = nullptr;
  std::atomic<uint64_t>* step_counters = nullptr;  // [tp_size], by rank
  ReplicaTotals* totals = nullptr;
  void* ring = nullptr;
  void* comm = nullptr;
  void* rendezvous = nullptr;  // the ncclUniqueId hand-off (CUDA backend)
};

// The launcher's parts of a mapped segment, constructed in place before fork (the ranks
// inherit the mapping): each report says "rank 0 failed" until its rank 0 says otherwise,
// every counter starts at 0, the output lock is free.
struct RunSegment {
  std::atomic<int64_t>* next_request = nullptr;    // the replicas' claim counter
  ProcessMutex* output_mutex = nullptr;            // around each result line (replicas)
  std::atomic<uint64_t>* step_counters = nullptr;  // [replicas * tp_size], replica-major
  std::vector<ReplicaRegion> replicas;
};
RunSegment init_run_segment(void* base, const RunSegmentLayout& layout);
// The same pointers into a segment another process initialised (a spawned worker maps it by
// name); constructs nothing.
RunSegment map_run_segment(void* base, const RunSegmentLayout& layout);

}  // namespace nanovllm
