#include "launcher/rank_processes.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "engine/job/interrupt.h"
#include "ipc/broadcast_step_executor.h"
#include "ipc/shm_communicator.h"
#include "ipc/step_command_serialization.h"
#include "ipc/step_ring_sizing.h"
#include "engine/step_builder.h"
#include "launcher/logging.h"
#include "launcher/supervisor.h"
#include "launcher/usage_error.h"
#include "rank/model_runner.h"
#include "rank/worker_loop.h"

namespace nanovllm {

namespace {

// The segment's first bytes: the exit status rank 0 asks for. Rank 0's process itself exits 0
// when only some requests failed, since the supervisor reads any non-zero exit as a crash.
struct RunReport {
  std::atomic<int32_t> rank0_exit;
};
constexpr size_t kReportBytes = 64;

// Segment: RunReport | ring region | communicator region, each 64-byte aligned.
struct SegmentLayout {
  size_t ring_offset = 0, ring_bytes = 0, comm_offset = 0, comm_bytes = 0, total = 0;
};

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// An EXIT command straight on the ring, for when rank 0 never built its executor.
void dismiss_workers(RingWriter& ring) {
  ring.write(encode_step_command(StepCommand{}));  // a default command is EXIT
}

std::unique_ptr<ModelRunner> load_model_runner(const RunSettings& s, Communicator& comm) {
  ModelRunnerOptions options;
  options.device = s.device;
  options.block_size = s.job.engine.kvcache_block_size;
  options.num_kv_blocks = s.job.engine.num_kvcache_blocks;
  options.gpu_memory_utilization = s.gpu_memory_utilization;
  options.enforce_eager = s.enforce_eager;
  options.max_num_batched_tokens = s.job.engine.max_num_batched_tokens;
  options.max_num_seqs = s.job.engine.max_num_seqs;
  options.max_model_len = s.job.engine.max_model_len;
  options.cpu_threads = s.cpu_threads;
  return std::make_unique<ModelRunner>(s.model_dir, s.model, comm, options);
}

}  // namespace

int run_single_process(const RunSettings& s, const Rank0Main& rank0_main) {
  install_interrupt_handler();
  try {
    SingleRankCommunicator comm;
    return rank0_main([&]() -> std::unique_ptr<StepExecutor> { return load_model_runner(s, comm); });
  } catch (const JobConfigError& e) {
    std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank 0] fatal: %s\n", e.what());
    return 1;
  }
}

int run_rank_processes(const RunSettings& s, spdlog::level::level_enum level,
                       const Rank0Main& rank0_main) {
  const EngineConfig& engine = s.job.engine;
  const RingConfig ring = step_ring_config(step_limits(engine), static_cast<uint32_t>(s.tp_size - 1));
  // Collectives on larger tensors run in chunks of the staging area.
  const size_t comm_elems = std::min<size_t>(
      size_t{1} << 20, static_cast<size_t>(s.model.hidden_size * engine.max_num_batched_tokens));
  SegmentLayout layout;
  layout.ring_offset = kReportBytes;
  layout.ring_bytes = align64(ring_region_bytes(ring));
  layout.comm_offset = layout.ring_offset + layout.ring_bytes;
  layout.comm_bytes = align64(shm_communicator_region_bytes(s.tp_size, comm_elems));
  layout.total = layout.comm_offset + layout.comm_bytes;

  SupervisorOptions options;
  if (const char* prefix = std::getenv("NANOVLLM_SHM_PREFIX"); prefix && *prefix)
    options.segment_prefix = prefix;
  options.segment_bytes = layout.total;
  Supervisor supervisor(options);
  auto* base = static_cast<uint8_t*>(supervisor.segment().data());
  void* ring_region = base + layout.ring_offset;
  void* comm_region = base + layout.comm_offset;
  auto* report = new (base) RunReport{};
  report->rank0_exit = 1;  // until rank 0 says otherwise
  ring_init(ring_region, layout.ring_bytes, ring);
  shm_communicator_init(comm_region, layout.comm_bytes, s.tp_size, comm_elems);
  spdlog::info("segment /dev/shm/{}: {} bytes ({} ring slots of {} bytes)",
               supervisor.segment().name(), layout.total, ring.slot_count, ring.slot_bytes);

  std::vector<std::function<int(int)>> ranks;
  ranks.emplace_back([&](int rank) {
    configure_logging(level, "rank 0");
    install_interrupt_handler();
    ShmCommunicator comm(comm_region, layout.comm_bytes, rank);
    RingWriter writer(ring_region, layout.ring_bytes);
    spdlog::info("rank {} started (pid {})", rank, ::getpid());
    bool loaded = false;
    int rc = kExitOk;
    try {
      rc = rank0_main([&]() -> std::unique_ptr<StepExecutor> {
        loaded = true;
        return std::make_unique<BroadcastStepExecutor>(load_model_runner(s, comm), writer);
      });
    } catch (const JobConfigError& e) {  // the job already dismissed the workers
      std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
      rc = kExitUsage;
    }
    if (!loaded) dismiss_workers(writer);  // nothing to run: they must not wait for steps
    report->rank0_exit = rc;
    // Exit codes the run chose travel through the report; the supervisor reads any other
    // non-zero exit as a crash.
    return rc == kExitRequestsFailed || rc == kExitUsage ? 0 : rc;
  });
  for (int r = 1; r < s.tp_size; ++r)
    ranks.emplace_back([&](int rank) {
      configure_logging(level, "rank " + std::to_string(rank));
      ignore_interrupts();
      ShmCommunicator comm(comm_region, layout.comm_bytes, rank);
      RingReader reader(ring_region, layout.ring_bytes, static_cast<uint32_t>(rank - 1));
      spdlog::info("rank {} started (pid {})", rank, ::getpid());
      const std::unique_ptr<ModelRunner> runner = load_model_runner(s, comm);
      return run_worker_loop(*runner, reader);
    });
  const SupervisorResult result = supervisor.run(ranks);
  if (result.exit_code != 0) {
    std::fprintf(stderr, "nanovllm-launch: %s\n", result.message.c_str());
    return result.exit_code;
  }
  return report->rank0_exit.load();
}

}  // namespace nanovllm
