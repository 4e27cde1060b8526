#include "launcher/worker_rank.h"

#include <memory>

#include "engine/job/interrupt.h"
#include "ipc/broadcast_ring.h"
#include "ipc/rendezvous.h"
#include "ipc/shm_communicator.h"
#include "ipc/step_command_serialization.h"
#include "launcher/counting_step_executor.h"
#include "launcher/nccl_group.h"
#include "launcher/rank_entry.h"
#include "rank/worker_loop.h"

namespace nanovllm {

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
    if (s.knock_out_all_reduce) nccl->knock_out_all_reduces(rank);
  } else {
    shm = std::make_unique<ShmCommunicator>(region.comm, layout.comm_bytes, rank);
  }
  Communicator& comm = nccl ? nccl->comm() : *shm;
  CountingStepExecutor runner(load_model_runner(s, comm), region.step_counters[rank]);
  ignore_stop_signals();
  return run_worker_loop(runner, reader);
}

}  // namespace nanovllm
