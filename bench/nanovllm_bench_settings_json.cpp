#include "bench/nanovllm_bench_settings_json.h"

#include "bench/nanovllm_bench_workloads.h"

namespace nanovllm::bench {

using nlohmann::json;

namespace {

json opt(const auto& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

json sampling_json(const BenchOptions& o) {
  const SamplingOverrides& f = o.sampling_flags;
  const SamplingOverrides d = sampling_choice(o).model_defaults;
  return {{"mode", o.sampling == SamplingMode::kModelDefaults ? "model-defaults" : "workload"},
          {"model_defaults",
           {{"temperature", opt(d.temperature)},
            {"top_k", opt(d.top_k)},
            {"top_p", opt(d.top_p)},
            {"min_p", opt(d.min_p)}}},
          {"flags",
           {{"temperature", opt(f.temperature)},
            {"top_k", opt(f.top_k)},
            {"top_p", opt(f.top_p)},
            {"min_p", opt(f.min_p)},
            {"seed", opt(f.seed)}}},
          {"stop", o.stop},
          {"logprobs", opt(o.logprobs)},
          {"presence_penalty", o.presence_penalty},
          {"frequency_penalty", o.frequency_penalty},
          {"repetition_penalty", o.repetition_penalty}};
}

json chunking_json(const EngineConfig& e) {
  return {{"enable_chunked_prefill", e.enable_chunked_prefill},
          {"long_prefill_token_threshold", e.long_prefill_token_threshold},
          {"chunked_step_mode", e.mixed_chunked_steps ? "mixed" : "alternating"},
          {"max_num_batched_tokens", e.max_num_batched_tokens}};
}

json engine_json(const EngineConfig& e, const RunSettings& s) {
  return {{"max_model_len", e.max_model_len},
          {"max_num_seqs", e.max_num_seqs},
          {"max_num_batched_tokens", e.max_num_batched_tokens},
          {"block_size", e.kvcache_block_size},
          {"num_kv_blocks", e.num_kvcache_blocks},
          {"enable_prefix_caching", e.enable_prefix_caching},
          {"async_scheduling", e.async_scheduling},
          {"enable_chunked_prefill", e.enable_chunked_prefill},
          {"long_prefill_token_threshold", e.long_prefill_token_threshold},
          {"chunked_step_mode", e.mixed_chunked_steps ? "mixed" : "alternating"},
          {"enforce_eager", s.enforce_eager},
          {"kv_cache_dtype", dtype_name(s.kv_cache_dtype)},
          {"all_reduce_knocked_out", s.knock_out_all_reduce}};
}

std::string model_name(const std::filesystem::path& dir) {
  const std::filesystem::path p = dir.lexically_normal();
  return (p.has_filename() ? p : p.parent_path()).filename().string();
}

}  // namespace nanovllm::bench
