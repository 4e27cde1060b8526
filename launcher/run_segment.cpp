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

}  // namespace

RunSegmentLayout run_segment_layout(int tp_size, size_t ring_bytes, size_t comm_bytes,
                                    size_t rendezvous_bytes) {
  RunSegmentLayout l;
  l.counters_offset = align64(sizeof(RunReport));
  l.ring_offset =
      l.counters_offset + align64(sizeof(std::atomic<uint64_t>) * static_cast<size_t>(tp_size));
  l.ring_bytes = align64(ring_bytes);
  l.comm_offset = l.ring_offset + l.ring_bytes;
  l.comm_bytes = align64(comm_bytes);
  l.rendezvous_offset = l.comm_offset + l.comm_bytes;
  l.rendezvous_bytes = align64(rendezvous_bytes);
  l.total = l.rendezvous_offset + l.rendezvous_bytes;
  return l;
}

RunSegment init_run_segment(void* base, const RunSegmentLayout& layout, int tp_size) {
  auto* bytes = static_cast<uint8_t*>(base);
  RunSegment s;
  s.report = new (bytes) RunReport{};
  s.report->rank0_exit = 1;  // until rank 0 says otherwise
  s.step_counters = reinterpret_cast<std::atomic<uint64_t>*>(bytes + layout.counters_offset);
  for (int r = 0; r < tp_size; ++r) new (&s.step_counters[r]) std::atomic<uint64_t>(0);
  s.ring = bytes + layout.ring_offset;
  s.comm = bytes + layout.comm_offset;
  s.rendezvous = bytes + layout.rendezvous_offset;
  return s;
}

}  // namespace nanovllm
