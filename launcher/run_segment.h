// The run's shared-memory segment as the launcher lays it out (ipc/README.md: the launcher
// decides the layout): RunReport | step counters (one per rank) | ring region | communicator
// region | rendezvous region, each 64-byte aligned. The report and the counters are the launcher's
// own: what rank 0 tells it at the end, and what the stall watchdog reads while the ranks run.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace nanovllm {

// What rank 0 tells the launcher. Rank 0's process itself exits 0 when only some requests
// failed, since the supervisor reads any non-zero exit as a crash.
struct RunReport {
  std::atomic<int32_t> rank0_exit;           // the exit status rank 0 asks for
  std::atomic<int32_t> stop_signal;          // the job stopped on it (0: not); counts below
  std::atomic<int64_t> finished_results;     // result lines written
  std::atomic<int64_t> unfinished_requests;  // requests that got no result
};

struct RunSegmentLayout {
  size_t counters_offset = 0, ring_offset = 0, ring_bytes = 0, comm_offset = 0, comm_bytes = 0;
  size_t rendezvous_offset = 0, rendezvous_bytes = 0;
  size_t total = 0;
};
RunSegmentLayout run_segment_layout(int tp_size, size_t ring_bytes, size_t comm_bytes,
                                    size_t rendezvous_bytes);

// The launcher's parts of a mapped segment, constructed in place before fork (the ranks
// inherit the mapping): the report says "rank 0 failed" until rank 0 says otherwise, every
// counter starts at 0.
struct RunSegment {
  RunReport* report = nullptr;
  std::atomic<uint64_t>* step_counters = nullptr;  // [tp_size], by rank
  void* ring = nullptr;
  void* comm = nullptr;
  void* rendezvous = nullptr;  // the ncclUniqueId hand-off (CUDA backend)
};
RunSegment init_run_segment(void* base, const RunSegmentLayout& layout, int tp_size);

}  // namespace nanovllm
