#include "launcher/group_segment.h"

#include <algorithm>
#include <cstdint>

#include "engine/step_builder.h"
#include "ipc/broadcast_ring.h"
#include "ipc/rendezvous.h"
#include "ipc/shm_communicator.h"
#include "launcher/rank_entry.h"

namespace nanovllm {

RingConfig run_ring_config(const RunSettings& s) {
  return step_ring_config(step_limits(s.job.engine),
                          static_cast<uint32_t>(std::max(s.tp_size - 1, 1)));
}

RunSegmentLayout run_layout(const RunSettings& s, int replicas) {
  const bool groups = s.tp_size > 1;
  return run_segment_layout(replicas, s.tp_size, groups ? ring_region_bytes(run_ring_config(s)) : 0,
                            groups ? shm_communicator_region_bytes(s.tp_size, comm_elems(s)) : 0,
                            groups ? rendezvous_region_bytes() : 0);
}

void init_group_regions(const RunSegment& segment, const RunSegmentLayout& layout,
                        const RunSettings& s) {
  if (s.tp_size == 1) return;
  const RingConfig ring = run_ring_config(s);
  for (const ReplicaRegion& region : segment.replicas) {
    ring_init(region.ring, layout.ring_bytes, ring);
    shm_communicator_init(region.comm, layout.comm_bytes, s.tp_size, comm_elems(s));
    rendezvous_init(region.rendezvous, layout.rendezvous_bytes);
  }
}

}  // namespace nanovllm
