#include "launcher/kv_cache_report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <string>

#include "ipc/step_limits.h"
#include "launcher/usage_error.h"
#include "rank/model_runner.h"

namespace nanovllm {

namespace {

std::string format_bytes(double bytes) {
  return bytes < 1073741824.0 ? fmt::format("{:.1f} MiB", bytes / 1048576.0)
                              : fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

// What set the KV block count, in the flags' words (for refusals).
std::string kv_count_source(const KvCacheSizing& k) {
  if (k.num_blocks_override)
    return "--num-gpu-blocks-override " + std::to_string(*k.num_blocks_override);
  if (k.cpu_kv_cache_space_gib)
    return fmt::format("--cpu-kv-cache-space {:g}", *k.cpu_kv_cache_space_gib);
  return "without --cpu-kv-cache-space, room for " + std::to_string(k.sequences) +
         (k.sequences == 1 ? " sequence" : " sequences") + " of max_model_len " +
         std::to_string(k.max_model_len) + " (--max-model-len)";
}

uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace

// Limits a known block count must respect, checked before any weight loads: slot ids
// (block x block_size + offset) are int32, and on the CPU backend every rank's cache plus rank
// 0's sampling state (max_num_seqs x vocabulary x 6 bytes) live in this machine's memory; past
// it the allocation would fail after loading.
void check_kv_cache_fits(const KvCacheSizing& k, const ModelConfig& model, Device device,
                         int num_blocks, int max_num_seqs) {
  if (num_blocks <= 0) return;  // CUDA: sized from memory after the warm-up
  const uint64_t memory = machine_memory_bytes();
  if (device == Device::kCpu && memory > 0) {
    const double kv = static_cast<double>(
                          ModelRunner::kv_block_bytes(model, k.tp_size, k.block_size, k.kv_dtype)) *
                      num_blocks * k.tp_size;
    const double sampling = 6.0 * max_num_seqs * static_cast<double>(model.vocab_size);
    if (kv + sampling > static_cast<double>(memory)) {
      std::string parts;
      if (kv >= sampling / 8)
        parts = fmt::format(
            "the KV cache, {} ({} block(s) of --block-size {} tokens on each of {} "
            "rank(s); {})",
            format_bytes(kv), num_blocks, k.block_size, k.tp_size, kv_count_source(k));
      if (sampling >= kv / 8)
        parts += fmt::format(
            "{}rank 0's sampling state, {} (--max-num-seqs {} x vocabulary {} x 6 bytes)",
            parts.empty() ? "" : " and ", format_bytes(sampling), max_num_seqs, model.vocab_size);
      throw UsageError(fmt::format(
          "the CPU backend would need {}, more than this machine's {} of memory: {}; lower the "
          "flags named",
          format_bytes(kv + sampling), format_bytes(static_cast<double>(memory)), parts));
    }
  }
  const int64_t slots = static_cast<int64_t>(num_blocks) * k.block_size;
  if (slots > INT32_MAX)
    throw UsageError(fmt::format(
        "--block-size {} x {} KV blocks ({}) is {} token slots, more than a 32-bit slot id "
        "reaches ({}); lower --block-size or the block count",
        k.block_size, num_blocks, kv_count_source(k), slots, INT32_MAX));
}

std::string kv_cache_line(const KvCacheSizing& k, const ModelConfig& model, Device device,
                          int num_blocks) {
  if (num_blocks <= 0) return "KV cache: sized from GPU memory after the warm-up";
  const size_t block_bytes =
      ModelRunner::kv_block_bytes(model, k.tp_size, k.block_size, k.kv_dtype);
  std::string why;
  if (k.num_blocks_override) {
    why = "--num-gpu-blocks-override " + std::to_string(*k.num_blocks_override);
  } else if (k.cpu_kv_cache_space_gib || device != Device::kCpu) {
    why = fmt::format("--cpu-kv-cache-space {:g}", k.cpu_kv_cache_space_gib.value_or(0.0));
  } else {
    const int64_t per_sequence = max_blocks_per_seq(k.max_model_len, k.block_size);
    const int64_t room = num_blocks / per_sequence;
    const std::string seqs =
        std::to_string(k.sequences) + (k.sequences == 1 ? " sequence" : " sequences") +
        " of up to max_model_len " + std::to_string(k.max_model_len) + " tokens";
    if (room >= k.sequences)
      why = "sized for " + seqs;
    else if (num_blocks > per_sequence)
      why = fmt::format("room for {} of the {}: the default stops at {:g} GiB", room, seqs,
                        kDefaultCpuKvCacheMaxGib);
    else
      why = fmt::format("room for 1 of the {}, the least that runs", seqs);
    why += "; --cpu-kv-cache-space sets it";
  }
  return fmt::format("KV cache: {} blocks of {} tokens{} ({} per rank, {})", num_blocks,
                     k.block_size,
                     k.kv_dtype == DType::kFp8E4M3 ? " in fp8"
                     : k.kv_dtype == DType::kI8    ? " in int8"
                                                   : "",
                     format_bytes(static_cast<double>(block_bytes) * num_blocks), why);
}

}  // namespace nanovllm
