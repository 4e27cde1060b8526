#include "launcher/run_segment.h"

#include <new>

namespace nanovllm {

namespace {

size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}

// Shared between processes through one mapping: lock-free, hence address-free.
static_assert(std::atomic<int32_t>::is_always_lock_free &&
              std::atomic<int64_t>::is_always_lock_free &&
              std::atomic<uint64_t>::is_always_lock_free);

// The data-parallel part: the claim counter, the output lock, then one ReplicaTotals each.
struct SharedHead {
  std::atomic<int64_t> next_request;
  ProcessMutex output_mutex;
};

}  // namespace

RunSegmentLayout run_segment_layout(int replicas, int tp_size, size_t ring_bytes, size_t comm_bytes,
                                    size_t rendezvous_bytes) {
  RunSegmentLayout l;
  l.replicas = replicas;
  l.tp_size = tp_size;
  l.totals_offset = align64(sizeof(SharedHead));
  l.counters_offset =
      l.totals_offset + align64(sizeof(ReplicaTotals) * static_cast<size_t>(replicas));
  l.replica_offset = l.counters_offset + align64(sizeof(std::atomic<uint64_t>) *
                                                 static_cast<size_t>(replicas) * tp_size);
  l.ring_offset = align64(sizeof(RunReport));
  l.ring_bytes = align64(ring_bytes);
  l.comm_offset = l.ring_offset + l.ring_bytes;
  l.comm_bytes = align64(comm_bytes);
  l.rendezvous_offset = l.comm_offset + l.comm_bytes;
  l.rendezvous_bytes = align64(rendezvous_bytes);
  l.replica_stride = l.rendezvous_offset + l.rendezvous_bytes;
  l.total = l.replica_offset + l.replica_stride * static_cast<size_t>(replicas);
  return l;
}

RunSegment map_run_segment(void* base, const RunSegmentLayout& l) {
  auto* bytes = static_cast<uint8_t*>(base);
  RunSegment s;
  auto* head = reinterpret_cast<SharedHead*>(bytes);
  s.next_request = &head->next_request;
  s.output_mutex = &head->output_mutex;
  auto* totals = reinterpret_cast<ReplicaTotals*>(bytes + l.totals_offset);
  s.step_counters = reinterpret_cast<std::atomic<uint64_t>*>(bytes + l.counters_offset);
  for (int d = 0; d < l.replicas; ++d) {
    uint8_t* region = bytes + l.replica_offset + l.replica_stride * static_cast<size_t>(d);
    ReplicaRegion r;
    r.report = reinterpret_cast<RunReport*>(region);
    r.step_counters = s.step_counters + static_cast<ptrdiff_t>(d) * l.tp_size;
    r.totals = &totals[d];
    r.ring = region + l.ring_offset;
    r.comm = region + l.comm_offset;
    r.rendezvous = region + l.rendezvous_offset;
    s.replicas.push_back(r);
  }
  return s;
}

RunSegment init_run_segment(void* base, const RunSegmentLayout& l) {
  auto* bytes = static_cast<uint8_t*>(base);
  auto* head = new (bytes) SharedHead{};
  head->next_request = 0;
  process_mutex_init(&head->output_mutex);
  auto* totals = reinterpret_cast<ReplicaTotals*>(bytes + l.totals_offset);
  auto* counters = reinterpret_cast<std::atomic<uint64_t>*>(bytes + l.counters_offset);
  for (int i = 0; i < l.replicas * l.tp_size; ++i) new (&counters[i]) std::atomic<uint64_t>(0);
  for (int d = 0; d < l.replicas; ++d) {
    uint8_t* region = bytes + l.replica_offset + l.replica_stride * static_cast<size_t>(d);
    new (region) RunReport{};
    new (&totals[d]) ReplicaTotals{};
  }
  RunSegment s = map_run_segment(base, l);
  for (const ReplicaRegion& r : s.replicas)
    r.report->rank0_exit = 1;  // until rank 0 says otherwise
  return s;
}

}  // namespace nanovllm
