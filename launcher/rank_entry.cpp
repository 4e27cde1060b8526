#include "launcher/rank_entry.h"

#include <algorithm>
#include <cstdio>

namespace nanovllm {

std::unique_ptr<ModelRunner> load_model_runner(const RunSettings& s, Communicator& comm,
                                               const NcclRank* nccl) {
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
  options.kv_cache_dtype = s.kv_cache_dtype;
  options.sample_from_shards = s.job.engine.shard_sampling_ranks > 1;
  options.nccl_setup_s = nccl ? nccl->setup_s() : 0.0;
  return std::make_unique<ModelRunner>(s.model_dir, s.model, comm, options);
}

size_t comm_elems(const RunSettings& s) {
  return std::min<size_t>(size_t{1} << 20,
                          static_cast<size_t>(s.model.hidden_size) *
                              static_cast<size_t>(s.job.engine.max_num_batched_tokens));
}

int announce_interruption(int sig, const std::optional<InterruptedJob>& job) {
  std::fprintf(stderr, "%s: %s\n", kLaunchProgram, interruption_summary(sig, job).c_str());
  return 128 + sig;
}

}  // namespace nanovllm
