#include "launcher/rank_processes.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/job/interrupt.h"
#include "engine/step_builder.h"
#include "ipc/broadcast_step_executor.h"
#include "ipc/shm_communicator.h"
#include "ipc/step_command_serialization.h"
#include "ipc/step_ring_sizing.h"
#include "launcher/counting_step_executor.h"
#include "launcher/logging.h"
#include "launcher/nccl_group.h"
#include "launcher/run_segment.h"
#include "launcher/stall_monitor.h"
#include "launcher/supervisor.h"
#include "launcher/usage_error.h"
#include "rank/model_runner.h"
#include "rank/worker_loop.h"

namespace nanovllm {

namespace {

constexpr const char* kProgram = "nanovllm-launch";

// An EXIT command straight on the ring, for when rank 0 never built its executor.
void dismiss_workers(RingWriter& ring) {
  ring.write(encode_step_command(StepCommand{}));  // a default command is EXIT
}

// `nccl`: rank 0 under --tp on CUDA, for its start-up timing (null elsewhere).
std::unique_ptr<ModelRunner> load_model_runner(const RunSettings& s, Communicator& comm,
                                               const NcclRank* nccl = nullptr) {
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
  options.nccl_setup_s = nccl ? nccl->setup_s() : 0.0;
  return std::make_unique<ModelRunner>(s.model_dir, s.model, comm, options);
}

// The closing line of a run that a stop signal ended; returns its exit status.
int announce_interruption(int sig, const std::optional<InterruptedJob>& job) {
  std::fprintf(stderr, "%s: %s\n", kProgram, interruption_summary(sig, job).c_str());
  return 128 + sig;
}

// --tp 1, from the watchdog's thread while the main thread hangs inside a step: _exit, since
// exit() would run destructors of objects that step is using. Results are written per line.
[[noreturn]] void exit_on_stall(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  std::fflush(stderr);
  ::_exit(1);
}

// Rank 0 under tensor parallelism tells the launcher how its job ended through the report.
void report_rank0_end(RunReport& report, int rc) {
  if (const std::optional<InterruptedJob> job = interrupted_job()) {
    report.finished_results = job->finished_results;
    report.unfinished_requests = job->unfinished_requests;
    report.stop_signal = interrupt_signal();
  }
  report.rank0_exit = rc;
}

std::optional<InterruptedJob> job_in(const RunReport& report) {
  if (report.stop_signal == 0) return std::nullopt;
  return InterruptedJob{report.finished_results, report.unfinished_requests};
}

}  // namespace

int run_single_process(const RunSettings& s, const Rank0Main& rank0_main,
                       const StallPolicy& stall) {
  install_interrupt_handler(kProgram);
  spdlog::info("rank 0 started (pid {})", ::getpid());
  std::atomic<uint64_t> steps{0};
  const InProcessStallMonitor watchdog(stall, steps, exit_on_stall);
  int rc = 1;
  try {
    SingleRankCommunicator comm;
    rc = rank0_main([&]() -> std::unique_ptr<StepExecutor> {
      auto executor = std::make_unique<CountingStepExecutor>(load_model_runner(s, comm), steps);
      poll_interrupts_from_now();  // the job's step loop comes next
      return executor;
    });
  } catch (const JobConfigError& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    // A rank-0 body may give up on the flag by throwing (the benchmark): still the signal.
    if (!interrupt_requested()) {
      std::fprintf(stderr, "[rank 0] fatal: %s\n", e.what());
      return 1;
    }
  }
  if (interrupt_requested()) return announce_interruption(interrupt_signal(), interrupted_job());
  return rc;
}

int run_rank_processes(const RunSettings& s, spdlog::level::level_enum level,
                       const Rank0Main& rank0_main, const StallPolicy& stall) {
  const EngineConfig& engine = s.job.engine;
  const RingConfig ring =
      step_ring_config(step_limits(engine), static_cast<uint32_t>(s.tp_size - 1));
  // Collectives on larger tensors run in chunks of the staging area.
  const size_t comm_elems = std::min<size_t>(
      size_t{1} << 20, static_cast<size_t>(s.model.hidden_size * engine.max_num_batched_tokens));
  const RunSegmentLayout layout = run_segment_layout(
      s.tp_size, ring_region_bytes(ring), shm_communicator_region_bytes(s.tp_size, comm_elems),
      rendezvous_region_bytes());

  SupervisorOptions options;
  if (const char* prefix = std::getenv("NANOVLLM_SHM_PREFIX"); prefix && *prefix)
    options.segment_prefix = prefix;
  options.segment_bytes = layout.total;
  Supervisor supervisor(options);
  const RunSegment segment = init_run_segment(supervisor.segment().data(), layout, s.tp_size);
  RunReport& report = *segment.report;
  ring_init(segment.ring, layout.ring_bytes, ring);
  shm_communicator_init(segment.comm, layout.comm_bytes, s.tp_size, comm_elems);
  rendezvous_init(segment.rendezvous, layout.rendezvous_bytes);
  const bool cuda = s.device == Device::kCuda;
  const pid_t launcher = ::getpid();
  spdlog::info("segment /dev/shm/{}: {} bytes ({} ring slots of {} bytes)",
               supervisor.segment().name(), layout.total, ring.slot_count, ring.slot_bytes);

  std::vector<std::function<int(int)>> ranks;
  ranks.emplace_back([&](int rank) {
    configure_logging(level, "rank 0");
    install_interrupt_handler(nullptr);  // the launcher writes the closing line
    // CPU: the shared-memory all-reduce; CUDA: NCCL, joined once the requests validated (the
    // publisher abandons the rendezvous if it never publishes, so the workers end cleanly).
    std::unique_ptr<ShmCommunicator> shm;
    if (!cuda) shm = std::make_unique<ShmCommunicator>(segment.comm, layout.comm_bytes, rank);
    RendezvousPublisher publisher(segment.rendezvous, layout.rendezvous_bytes);
    std::unique_ptr<NcclRank> nccl;
    RingWriter writer(segment.ring, layout.ring_bytes, kStepCommandSchemaVersion);
    spdlog::info("rank {} started (pid {})", rank, ::getpid());
    bool loaded = false;
    int rc = kExitOk;
    try {
      rc = rank0_main([&]() -> std::unique_ptr<StepExecutor> {
        loaded = true;
        if (cuda) nccl = start_nccl_rank0(publisher, s.tp_size, launcher, s.custom_all_reduce);
        Communicator& comm = cuda ? nccl->comm() : *shm;
        auto executor = std::make_unique<CountingStepExecutor>(
            std::make_unique<BroadcastStepExecutor>(load_model_runner(s, comm, nccl.get()), writer),
            segment.step_counters[rank]);
        poll_interrupts_from_now();  // the job's step loop comes next
        return executor;
      });
    } catch (const JobConfigError& e) {  // the job already dismissed the workers
      std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
      rc = kExitUsage;
    }
    if (!loaded) {  // nothing to run: the workers must not wait for a model or steps
      publisher.abandon();
      if (!cuda) dismiss_workers(writer);
    }
    report_rank0_end(report, rc);
    // Exit codes the run chose travel through the report; the supervisor reads any other
    // non-zero exit as a crash.
    return rc == kExitRequestsFailed || rc == kExitUsage || rc == kExitInterrupted ? 0 : rc;
  });
  for (int r = 1; r < s.tp_size; ++r)
    ranks.emplace_back([&](int rank) {
      configure_logging(level, "rank " + std::to_string(rank));
      // While it loads, a stop signal ends the worker at once (nothing to lose; no core dump
      // for SIGQUIT). Then it ignores them: rank 0 stops after its current step, which needs
      // this rank in every collective, and ends the loop with EXIT.
      install_interrupt_handler(nullptr);
      RingReader reader(segment.ring, layout.ring_bytes, kStepCommandSchemaVersion,
                        static_cast<uint32_t>(rank - 1));
      spdlog::info("rank {} started (pid {})", rank, ::getpid());
      std::unique_ptr<ShmCommunicator> shm;
      RendezvousWaiter waiter(segment.rendezvous, layout.rendezvous_bytes);
      std::unique_ptr<NcclRank> nccl;
      if (cuda) {
        nccl = join_nccl_rank(waiter, rank, s.tp_size, s.custom_all_reduce);
        if (!nccl) return 0;  // rank 0 had nothing to run
      } else {
        shm = std::make_unique<ShmCommunicator>(segment.comm, layout.comm_bytes, rank);
      }
      Communicator& comm = cuda ? nccl->comm() : *shm;
      CountingStepExecutor runner(load_model_runner(s, comm), segment.step_counters[rank]);
      ignore_stop_signals();
      return run_worker_loop(runner, reader);
    });
  const SupervisorResult result =
      supervisor.run(ranks, make_stall_tick_hook(stall, segment.step_counters));
  if (result.interrupted_by != 0)
    return announce_interruption(result.interrupted_by, job_in(report));
  if (result.exit_code != 0) {
    std::fprintf(stderr, "%s: %s\n", kProgram, result.message.c_str());
    return result.exit_code;
  }
  // A stop signal sent to rank 0 alone: its job stopped as on one sent to the launcher.
  if (report.stop_signal != 0) return announce_interruption(report.stop_signal, job_in(report));
  return report.rank0_exit.load();
}

}  // namespace nanovllm
