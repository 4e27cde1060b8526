// nanovllm-launch: parses the flags, fixes the run's settings (engine limits, KV-cache blocks,
// ring slots) from the flags and the model's config.json, then either runs rank 0 in this
// process (--tp 1: no ring, no rank processes) or lays out the shared-memory segment, forks one
// process per rank and supervises them (ipc/README.md). Exit status: 0; 1 when a request failed
// or a rank died; 2 on a usage or configuration error; 130 after SIGINT.
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "ipc/shm_communicator.h"
#include "launcher/cli.h"
#include "launcher/supervisor.h"
#include "rank/kv_cache_sizing.h"
#include "rank/rank_main.h"
#include "rank/step_ring_sizing.h"

namespace nanovllm {
namespace {

constexpr int kExitUsage = 2;
constexpr int kDefaultMaxModelLen = 4096;  // nano-vllm's default, capped by the model's limit

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

void configure_logging(spdlog::level::level_enum level, const std::string& who) {
  // Results may go to stdout: every log line goes to stderr.
  static const auto logger = spdlog::stderr_color_mt("nanovllm");
  spdlog::set_default_logger(logger);
  spdlog::set_level(level);
  spdlog::set_pattern("[%H:%M:%S.%e] [" + who + "] [%^%l%$] %v");
}

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// Usage errors (exit 2) as opposed to environment failures.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

RunSettings make_settings(const LaunchOptions& o) {
  RunSettings s;
  s.model_dir = o.model;
  s.prompts = o.prompts;
  s.output = o.output;
  s.resume = o.resume;
  s.tp_size = o.tensor_parallel_size;
  s.device = o.device;
  s.cpu_threads = std::max(1, available_cpus() / s.tp_size);
  if (s.device == Device::CUDA && s.tp_size > 1)
    throw ConfigError("--tp " + std::to_string(s.tp_size) +
                      " on --device cuda needs the NCCL communicator, which does not exist yet; "
                      "use --tp 1 or --device cpu");
  s.model = load_model_config(s.model_dir);
  if (s.model.num_key_value_heads % s.tp_size != 0 || s.model.num_attention_heads % s.tp_size != 0)
    throw ConfigError("--tp " + std::to_string(s.tp_size) + " must divide the model's " +
                      std::to_string(s.model.num_attention_heads) + " attention heads and " +
                      std::to_string(s.model.num_key_value_heads) + " key/value heads");

  EngineConfig& e = s.engine;
  e.max_num_batched_tokens = o.max_num_batched_tokens;
  e.max_num_seqs = o.max_num_seqs;
  e.max_model_len = o.max_model_len.value_or(kDefaultMaxModelLen);
  e.cap_max_model_len(static_cast<int>(s.model.max_position_embeddings));
  e.kvcache_block_size = o.block_size;
  e.eos_token_ids = s.model.eos_token_ids;
  try {
    e.validate();
  } catch (const std::invalid_argument& err) {
    throw ConfigError(err.what());
  }

  KvCacheSizing sizing;
  sizing.num_blocks_override = o.num_gpu_blocks_override;
  sizing.cpu_kv_cache_space_gib = o.cpu_kv_cache_space_gib;
  sizing.block_size = o.block_size;
  sizing.tp_size = s.tp_size;
  e.num_kvcache_blocks = plan_kv_cache_blocks(sizing, s.model, s.device);
  s.gpu_memory_utilization = o.gpu_memory_utilization;
  s.enforce_eager = o.enforce_eager;

  s.cli_sampling = o.sampling;
  s.cli_sampling.seed.reset();  // not a shared seed: the base of each request's derived seed
  s.seed = o.sampling.seed.value_or(0);
  spdlog::info("model {} ({} layers, hidden {}), --tp {}, device {}, max_model_len {}, "
               "{} KV blocks of {} tokens (0: sized after warm-up), {} CPU threads per rank",
               s.model_dir.string(), s.model.num_hidden_layers, s.model.hidden_size, s.tp_size,
               s.device == Device::CPU ? "cpu" : "cuda", e.max_model_len, e.num_kvcache_blocks,
               e.kvcache_block_size, s.cpu_threads);
  return s;
}

int run_single_process(const RunSettings& s) {
  install_rank0_interrupt_handler();
  try {
    SingleRankCommunicator comm;
    return run_rank0(s, comm, nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank 0] fatal: %s\n", e.what());
    return 1;
  }
}

int run_ranks(const RunSettings& s, spdlog::level::level_enum level) {
  const RingConfig ring = step_ring_config(s.engine, static_cast<uint32_t>(s.tp_size - 1));
  // Collectives on larger tensors run in chunks of the staging area.
  const size_t comm_elems = std::min<size_t>(
      size_t{1} << 20, static_cast<size_t>(s.model.hidden_size * s.engine.max_num_batched_tokens));
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
    install_rank0_interrupt_handler();
    ShmCommunicator comm(comm_region, layout.comm_bytes, rank);
    RingWriter writer(ring_region, layout.ring_bytes);
    spdlog::info("rank {} started (pid {})", rank, ::getpid());
    const int rc = run_rank0(s, comm, &writer);
    report->rank0_exit = rc;
    return rc == kExitRequestsFailed ? 0 : rc;
  });
  for (int r = 1; r < s.tp_size; ++r)
    ranks.emplace_back([&](int rank) {
      configure_logging(level, "rank " + std::to_string(rank));
      ignore_interrupts();
      ShmCommunicator comm(comm_region, layout.comm_bytes, rank);
      RingReader reader(ring_region, layout.ring_bytes, static_cast<uint32_t>(rank - 1));
      spdlog::info("rank {} started (pid {})", rank, ::getpid());
      return run_worker(s, comm, reader);
    });
  const SupervisorResult result = supervisor.run(ranks);
  if (result.exit_code != 0) {
    std::fprintf(stderr, "nanovllm-launch: %s\n", result.message.c_str());
    return result.exit_code;
  }
  return report->rank0_exit.load();
}

int launch_main(int argc, char** argv) {
  const LaunchParse parse = parse_launch_options(argc, argv);
  if (!parse.options) {
    std::fputs(parse.message.c_str(), parse.exit_code == 0 ? stdout : stderr);
    return parse.exit_code;
  }
  const LaunchOptions& o = *parse.options;
  configure_logging(o.log_level, "launcher");
  if (!parse.notice.empty()) spdlog::warn("{}", parse.notice);
  RunSettings settings;
  try {
    settings = make_settings(o);
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
    return 1;
  }
  if (settings.tp_size == 1) return run_single_process(settings);
  try {
    return run_ranks(settings, o.log_level);
  } catch (const std::exception& e) {  // the segment could not be created, ...
    std::fprintf(stderr, "nanovllm-launch: %s\n", e.what());
    return 1;
  }
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) { return nanovllm::launch_main(argc, argv); }
