// run_replica_groups (launcher/rank_processes.h): every rank process of every replica under
// one Supervisor.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/job/interrupt.h"
#include "ipc/broadcast_step_executor.h"
#include "ipc/shm_communicator.h"
#include "ipc/step_command_serialization.h"
#include "ipc/step_ring_sizing.h"
#include "launcher/counting_step_executor.h"
#include "launcher/gpu_probe.h"
#include "launcher/group_segment.h"
#include "launcher/logging.h"
#include "launcher/nccl_group.h"
#include "launcher/rank_entry.h"
#include "launcher/rank_processes.h"
#include "launcher/stall_monitor.h"
#include "launcher/supervisor.h"
#include "launcher/usage_error.h"
#include "launcher/worker_rank.h"

namespace nanovllm {

namespace {

// An EXIT command straight on the ring, for when rank 0 never built its executor.
void dismiss_workers(RingWriter& ring) {
  ring.write(encode_step_command(StepCommand{}));  // a default command is EXIT
}

// Rank 0 tells the launcher how its job ended through its replica's report.
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

// Exit codes the run chose travel through the report; the supervisor reads any other non-zero
// exit as a crash.
int process_exit_of(int rc) {
  return rc == kExitRequestsFailed || rc == kExitUsage || rc == kExitInterrupted ? 0 : rc;
}

// The run's processes: replica-major, rank within the replica minor.
struct GroupShape {
  int replicas = 1, tp = 1;
  std::string name(int index) const {
    const std::string rank = "rank " + std::to_string(index % tp);
    return replicas == 1 ? rank : "replica " + std::to_string(index / tp) + " " + rank;
  }
};

// The stall watchdog, one per replica: the ranks of one replica step together, those of
// different replicas at their own pace.
TickHook replica_stall_hooks(const StallPolicy& stall, const RunSegment& seg,
                             const GroupShape& shape) {
  if (!stall.enabled()) return {};
  std::vector<TickHook> hooks;
  for (const ReplicaRegion& region : seg.replicas)
    hooks.push_back(make_stall_tick_hook(stall, region.step_counters));
  return [hooks, shape](const std::vector<RankState>& ranks) -> std::optional<TickFailure> {
    for (int d = 0; d < shape.replicas; ++d) {
      std::vector<RankState> mine;
      for (int r = 0; r < shape.tp; ++r) {
        RankState state = ranks[static_cast<size_t>(d * shape.tp + r)];
        state.rank = r;
        mine.push_back(state);
      }
      std::optional<TickFailure> failure = hooks[static_cast<size_t>(d)](mine);
      if (!failure) continue;
      failure->rank += d * shape.tp;
      if (shape.replicas > 1)
        failure->message = "replica " + std::to_string(d) + ": " + failure->message;
      return failure;
    }
    return std::nullopt;
  };
}

}  // namespace

int run_replica_groups(const RunSettings& s, spdlog::level::level_enum level, ReplicaGroupsJob& job,
                       const StallPolicy& stall) {
  const GroupShape shape{job.replicas(), s.tp_size};
  const bool ring_needed = shape.tp > 1;
  const RingConfig ring = run_ring_config(s);
  const RunSegmentLayout layout = run_layout(s, shape.replicas);

  SupervisorOptions options;
  if (const char* prefix = std::getenv("NANOVLLM_SHM_PREFIX"); prefix && *prefix)
    options.segment_prefix = prefix;
  options.segment_bytes = layout.total;
  options.rank_name = [shape](int index) { return shape.name(index); };
  Supervisor supervisor(options);
  const RunSegment seg = init_run_segment(supervisor.segment().data(), layout);
  init_group_regions(seg, layout, s);
  job.attach(seg);
  const bool cuda = s.device == Device::kCuda;
  const pid_t launcher = ::getpid();
  spdlog::info("segment /dev/shm/{}: {} bytes{}", supervisor.segment().name(), layout.total,
               ring_needed ? fmt::format(" ({} ring slots of {} bytes a replica)", ring.slot_count,
                                         ring.slot_bytes)
                           : "");
  // Each replica sees only its own GPUs, so its ranks bind GPU 0 ... tp - 1 as with one.
  std::vector<std::string> gpus(static_cast<size_t>(shape.replicas));
  if (cuda && shape.replicas > 1) {
    const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
    const std::optional<std::string> visible_env =
        env ? std::optional<std::string>(env) : std::nullopt;
    const int visible = visible_gpu_count();
    for (int d = 0; d < shape.replicas; ++d) {
      gpus[static_cast<size_t>(d)] = replica_visible_devices(visible, visible_env, d, shape.tp);
      if (gpus[static_cast<size_t>(d)].empty())
        throw UsageError("replica " + std::to_string(d) + " needs GPUs " +
                         std::to_string(d * shape.tp) + "-" +
                         std::to_string(d * shape.tp + shape.tp - 1) + " but " +
                         std::to_string(visible) + " are visible");
      spdlog::info("replica {}: CUDA_VISIBLE_DEVICES={}", d, gpus[static_cast<size_t>(d)]);
    }
  }
  const auto enter = [&](int d, int r) {
    if (!gpus[static_cast<size_t>(d)].empty())
      ::setenv("CUDA_VISIBLE_DEVICES", gpus[static_cast<size_t>(d)].c_str(), 1);
    configure_logging(level, shape.name(d * shape.tp + r));
    // While it loads, a stop signal ends the process at once (nothing to lose); rank 0's
    // job then polls the flag, the workers ignore them (rank 0 ends their loop with EXIT).
    install_interrupt_handler(nullptr);  // the launcher writes the closing line
    spdlog::info("{} started (pid {})", shape.name(d * shape.tp + r), ::getpid());
  };

  std::vector<std::function<int(int)>> processes;
  for (int d = 0; d < shape.replicas; ++d) {
    const ReplicaRegion& region = seg.replicas[static_cast<size_t>(d)];
    processes.emplace_back([&, d, region](int) {
      enter(d, 0);
      int rc = kExitOk;
      if (!ring_needed) {  // --tp 1: the model beside the job, no ring
        SingleRankCommunicator comm;
        try {
          rc = job.rank0_main(d, [&]() -> std::unique_ptr<StepExecutor> {
            auto executor = std::make_unique<CountingStepExecutor>(load_model_runner(s, comm),
                                                                   region.step_counters[0]);
            poll_interrupts_from_now();  // the job's step loop comes next
            return executor;
          });
        } catch (const JobConfigError& e) {
          std::fprintf(stderr, "%s: %s\n", kLaunchProgram, e.what());
          rc = kExitUsage;
        }
        report_rank0_end(*region.report, rc);
        return process_exit_of(rc);
      }
      // CPU: the shared-memory all-reduce; CUDA: NCCL, joined once the requests validated
      // (the publisher abandons the rendezvous if it never publishes, so the workers end
      // cleanly).
      std::unique_ptr<ShmCommunicator> shm;
      if (!cuda) shm = std::make_unique<ShmCommunicator>(region.comm, layout.comm_bytes, 0);
      RendezvousPublisher publisher(region.rendezvous, layout.rendezvous_bytes);
      std::unique_ptr<NcclRank> nccl;
      RingWriter writer(region.ring, layout.ring_bytes, kStepCommandSchemaVersion);
      bool loaded = false;
      try {
        rc = job.rank0_main(d, [&]() -> std::unique_ptr<StepExecutor> {
          loaded = true;
          if (cuda) nccl = start_nccl_rank0(publisher, shape.tp, launcher, s.custom_all_reduce);
          if (nccl && s.knock_out_all_reduce) nccl->knock_out_all_reduces(0);
          Communicator& comm = cuda ? nccl->comm() : *shm;
          auto executor = std::make_unique<CountingStepExecutor>(
              std::make_unique<BroadcastStepExecutor>(load_model_runner(s, comm, nccl.get()),
                                                      writer),
              region.step_counters[0]);
          poll_interrupts_from_now();  // the job's step loop comes next
          return executor;
        });
      } catch (const JobConfigError& e) {  // the job already dismissed the workers
        std::fprintf(stderr, "%s: %s\n", kLaunchProgram, e.what());
        rc = kExitUsage;
      }
      if (!loaded) {  // nothing to run: the workers must not wait for a model or steps
        publisher.abandon();
        if (!cuda) dismiss_workers(writer);
      }
      report_rank0_end(*region.report, rc);
      return process_exit_of(rc);
    });
    for (int r = 1; r < shape.tp; ++r)
      processes.emplace_back([&, d, region](int index) {
        const int rank = index % shape.tp;
        enter(d, rank);
        return run_worker_rank(s, layout, region, rank);
      });
  }
  const TickHook stall_hook = replica_stall_hooks(stall, seg, shape);
  const SupervisorResult result =
      supervisor.run(processes, [&](const std::vector<RankState>& ranks) {
        job.on_tick();
        return stall_hook ? stall_hook(ranks) : std::nullopt;
      });
  job.on_end();
  const auto kept = [&] {
    const std::optional<InterruptedJob> k = job.kept_results();
    return k ? k : job_in(*seg.replicas[0].report);
  };
  if (result.interrupted_by != 0) return announce_interruption(result.interrupted_by, kept());
  if (result.exit_code != 0) {
    std::fprintf(stderr, "%s: %s\n", kLaunchProgram, result.message.c_str());
    return result.exit_code;
  }
  // A stop signal sent to a rank 0 alone: its job stopped as on one sent to the launcher.
  for (const ReplicaRegion& region : seg.replicas)
    if (region.report->stop_signal != 0)
      return announce_interruption(region.report->stop_signal, kept());
  int rc = kExitOk;  // the worst: a configuration error (2) over failed requests (1)
  for (const ReplicaRegion& region : seg.replicas)
    rc = std::max(rc, region.report->rank0_exit.load());
  return rc;
}

}  // namespace nanovllm
