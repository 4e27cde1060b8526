// scheduler_sim: drives LLMEngine with a simulated model (a deterministic fake StepExecutor)
// over a synthetic workload, and reports how the scheduler and prefix cache behave:
// steps, tokens, preemptions, cache hit rate and host time spent scheduling per step.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include "engine/llm_engine.h"

namespace nanovllm {
namespace {

struct SimOptions {
  int num_requests = 512;
  uint64_t seed = 0;
  int num_blocks = 512;  // 512 x 256 tokens: ~1/4 of the workload's peak demand
  int block_size = 256;
  int max_num_seqs = 512;
  int max_num_batched_tokens = 16384;
  int max_model_len = 4096;
  int min_prompt = 100, max_prompt = 1024;
  int min_output = 100, max_output = 1024;
  int num_system_prompts = 4;
  int system_prompt_len = 300;  // shared prefix tokens (part of the prompt length)
  int vocab_size = 151936;
};

// The "model": next token = hash(the row's seed, position); never eos (requests set
// ignore_eos). Seeds are kept per sampling slot, as rank 0's device keeps them.
class SimulatedExecutor : public StepExecutor {
 public:
  SimulatedExecutor(int vocab_size, int num_blocks, int max_num_seqs)
      : vocab_size_(vocab_size),
        num_blocks_(num_blocks),
        slot_seeds_(static_cast<size_t>(std::max(max_num_seqs, 0))) {}
  int num_kv_blocks() const override { return num_blocks_; }
  StepResult execute(const StepCommand& cmd) override {
    for (const SlotSamplingParams& p : cmd.new_slot_params) slot_seeds_.at(p.slot) = p.seed;
    StepResult out;
    for (size_t row = 0; row < cmd.sample_slots.size(); ++row) {
      // The sampled token's number: the row's position + 1.
      const auto position = static_cast<uint64_t>(cmd.positions[cmd.logits_indices[row]] + 1);
      uint64_t x = slot_seeds_.at(cmd.sample_slots[row]) * 0x9e3779b97f4a7c15ull + position;
      x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
      out.sampled_token_ids.push_back(
          static_cast<int32_t>((x ^ (x >> 29)) % static_cast<uint64_t>(vocab_size_)));
    }
    return out;
  }

 private:
  int vocab_size_, num_blocks_;
  std::vector<uint64_t> slot_seeds_;  // [max_num_seqs] seed of each sampling slot
};

int run(const SimOptions& o) {
  EngineConfig config;
  config.num_kvcache_blocks = o.num_blocks;
  config.kvcache_block_size = o.block_size;
  config.max_num_seqs = o.max_num_seqs;
  config.max_num_batched_tokens = o.max_num_batched_tokens;
  config.max_model_len = o.max_model_len;
  SimulatedExecutor runner(o.vocab_size, o.num_blocks, o.max_num_seqs);
  LLMEngine engine(config, runner);  // throws std::invalid_argument on a bad setting

  std::mt19937_64 rng(o.seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<std::vector<int32_t>> system_prompts(std::max(o.num_system_prompts, 0));
  for (auto& p : system_prompts)
    for (int i = 0; i < o.system_prompt_len; ++i) p.push_back(uniform(0, o.vocab_size - 1));
  int64_t prompt_tokens = 0;
  for (int i = 0; i < o.num_requests; ++i) {
    const int len = uniform(o.min_prompt, o.max_prompt);
    std::vector<int32_t> prompt;
    if (!system_prompts.empty()) {
      const auto& sys = system_prompts[uniform(0, static_cast<int>(system_prompts.size()) - 1)];
      prompt.assign(sys.begin(), sys.begin() + std::min<int>(len, static_cast<int>(sys.size())));
    }
    while (static_cast<int>(prompt.size()) < len) prompt.push_back(uniform(0, o.vocab_size - 1));
    SamplingParams params;
    params.ignore_eos = true;
    params.max_tokens = uniform(o.min_output, o.max_output);
    const AddRequestResult added = engine.add_request(std::move(prompt), params);
    if (!added.ok())
      spdlog::warn("request {} rejected: {}", i, added.error);
    else
      prompt_tokens += len;
  }

  const auto start = std::chrono::steady_clock::now();
  int64_t finished = 0, completion_tokens = 0;
  double max_step_sched = 0;
  while (!engine.is_finished()) {
    const double before = engine.stats().scheduler_seconds;
    for (const RequestOutput& out : engine.step()) {
      ++finished;
      completion_tokens += static_cast<int64_t>(out.completion_token_ids.size());
    }
    max_step_sched = std::max(max_step_sched, engine.stats().scheduler_seconds - before);
    const EngineStats& s = engine.stats();
    if (s.num_steps % 2000 == 0)
      spdlog::info("step {}: {} finished, {} running, {} waiting, {} preemptions", s.num_steps,
                   finished, engine.scheduler().running().size(),
                   engine.scheduler().waiting().size(), s.num_preemptions);
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const EngineStats& s = engine.stats();
  const double prefill_total = static_cast<double>(s.num_prefill_tokens + s.num_cached_tokens);
  std::printf("| %-34s | %14s |\n", "metric", "value");
  std::printf("|%s|%s|\n", std::string(36, '-').c_str(), std::string(16, '-').c_str());
  auto row_i = [](const char* k, int64_t v) {
    std::printf("| %-34s | %14lld |\n", k, static_cast<long long>(v));
  };
  auto row_f = [](const char* k, double v) { std::printf("| %-34s | %14.3f |\n", k, v); };
  row_i("requests finished", s.num_finished);
  row_i("requests rejected", s.num_rejected);
  row_i("prompt tokens", prompt_tokens);
  row_i("completion tokens", completion_tokens);
  row_i("steps", s.num_steps);
  row_i("prefill steps", s.num_prefill_steps);
  row_i("decode steps", s.num_decode_steps);
  row_i("prefill tokens computed", s.num_prefill_tokens);
  row_i("prefill tokens from prefix cache", s.num_cached_tokens);
  row_i("decode tokens", s.num_decode_tokens);
  row_i("preemptions", s.num_preemptions);
  row_f("prefix-cache hit rate (%)",
        prefill_total > 0 ? 100.0 * s.num_cached_tokens / prefill_total : 0);
  row_f("mean decode batch",
        s.num_decode_steps ? static_cast<double>(s.num_decode_tokens) / s.num_decode_steps : 0);
  row_f("scheduler us/step (mean)", s.num_steps ? 1e6 * s.scheduler_seconds / s.num_steps : 0);
  row_f("scheduler us/step (max)", 1e6 * max_step_sched);
  row_f("wall seconds", wall);
  return finished == s.num_finished ? 0 : 1;
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) {
  nanovllm::SimOptions o;
  CLI::App app{"Simulate nanovllm's scheduler and prefix cache on a synthetic workload"};
  app.add_option("--num-requests", o.num_requests, "requests in the workload")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--seed", o.seed, "workload random seed");
  app.add_option("--num-blocks", o.num_blocks, "KV cache blocks")->check(CLI::PositiveNumber);
  app.add_option("--block-size", o.block_size, "tokens per KV block")->check(CLI::PositiveNumber);
  app.add_option("--max-num-seqs", o.max_num_seqs, "running sequences at most");
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens,
                 "prefill token budget per step");
  app.add_option("--max-model-len", o.max_model_len, "tokens per sequence at most");
  app.add_option("--min-prompt", o.min_prompt, "shortest prompt")->check(CLI::PositiveNumber);
  app.add_option("--max-prompt", o.max_prompt, "longest prompt")->check(CLI::PositiveNumber);
  app.add_option("--min-output", o.min_output, "fewest output tokens")->check(CLI::PositiveNumber);
  app.add_option("--max-output", o.max_output, "most output tokens")->check(CLI::PositiveNumber);
  app.add_option("--num-system-prompts", o.num_system_prompts,
                 "distinct shared prefixes (0 = none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--system-prompt-len", o.system_prompt_len, "shared prefix tokens")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (o.min_prompt > o.max_prompt || o.min_output > o.max_output) {
    spdlog::error("--min-prompt/--min-output must not exceed --max-prompt/--max-output");
    return 2;
  }
  try {
    return nanovllm::run(o);
  } catch (const std::invalid_argument& e) {
    spdlog::error("{}", e.what());
    return 2;
  }
}
