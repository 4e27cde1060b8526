#include "launcher/worker_rank.h"

#include <algorithm>
#include <memory>

#include "engine/job/interrupt.h"
#include "engine/step_builder.h"
#include "ipc/broadcast_ring.h"
#include "ipc/rendezvous.h"
#include "ipc/shm_communicator.h"
#include "ipc/step_command_serialization.h"
#include "ipc/step_ring_sizing.h"
#include "launcher/counting_step_executor.h"
#include "launcher/nccl_group.h"
#include "launcher/rank_entry.h"
#include "rank/worker_loop.h"

namespace nanovllm {

RunSegmentLayout run_layout(const RunSettings& s, int replicas) {
  const bool ring_needed = s.tp_size > 1;
  const RingConfig ring = step_ring_config(step_limits(s.job.engine),
                                           static_cast<uint32_t>(std::max(s.tp_size - 1, 1)));
  return run_segment_layout(
      replicas, s.tp_size, ring_needed ? ring_region_bytes(ring) : 0,
      ring_needed ? shm_communicator_region_bytes(s.tp_size, comm_elems(s)) : 0,
      ring_needed ? rendezvous_region_bytes() : 0);
}

int run_worker_rank(const RunSettings& s, const RunSegmentLayout& layout,
                    const ReplicaRegion& region, int rank) {
  RingReader reader(region.ring, layout.ring_bytes, kStepCommandSchemaVersion,
                    static_cast<uint32_t>(rank - 1));
  std::unique_ptr<ShmCommunicator> shm;
  RendezvousWaiter waiter(region.rendezvous, layout.rendezvous_bytes);
  std::unique_ptr<NcclRank> nccl;
  if (s.device == Device::kCuda) {
    nccl = join_nccl_rank(waiter, rank, s.tp_size, s.custom_all_reduce);
    if (!nccl) return 0;  // rank 0 had nothing to run
  } else {
    shm = std::make_unique<ShmCommunicator>(region.comm, layout.comm_bytes, rank);
  }
  Communicator& comm = nccl ? nccl->comm() : *shm;
  CountingStepExecutor runner(load_model_runner(s, comm), region.step_counters[rank]);
  ignore_stop_signals();
  return run_worker_loop(runner, reader);
}

}  // namespace nanovllm
