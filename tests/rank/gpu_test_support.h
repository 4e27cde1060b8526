// Support for the GPU generation checks (gpu_generation_test.cpp): the environment they need
// (model folder, reference, optional 8-bit KV cache), the transformers reference written by
// scripts/make_gpu_reference.py, log-softmax / top-k on the host, the
// greedy comparison rule of vLLM's check_logprobs_close, and a StepExecutor that records the
// top-5 of every sampled row while the engine generates.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ipc/step_executor.h"
#include "kernels/check.h"
#include "rank/model_runner.h"

namespace nanovllm::gpu_test {

// The checks' inputs: the model folder and its reference, on a machine with a CUDA device.
struct Env {
  std::filesystem::path model_dir, reference;
};
inline std::optional<Env> env() {
  const char* m = std::getenv("NANOVLLM_GPU_MODEL_DIR");
  const char* r = std::getenv("NANOVLLM_GPU_REFERENCE");
  int n = 0;
  if (!m || !r || cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return std::nullopt;
  return Env{m, r};
}
#define SKIP_WITHOUT_GPU_MODEL()                                                                \
  do {                                                                                          \
    if (!env())                                                                                 \
      GTEST_SKIP() << "needs a CUDA device, NANOVLLM_GPU_MODEL_DIR and NANOVLLM_GPU_REFERENCE"; \
  } while (0)

// NANOVLLM_GPU_KV_CACHE_DTYPE's 8-bit cache: fp8, int8, or none (bf16).
inline DType cache_dtype() {
  const char* dtype = std::getenv("NANOVLLM_GPU_KV_CACHE_DTYPE");
  const std::string d = dtype != nullptr ? dtype : "";
  return d == "fp8" ? DType::kFp8E4M3 : d == "int8" ? DType::kI8 : DType::kBf16;
}
// Either 8-bit cache: the tests name it fp8 (int8's rounding is finer, the same rules
// hold).
inline bool fp8_cache() {
  return cache_dtype() != DType::kBf16;
}
// The tests held to transformers bf16's noise: an fp8 cache adds its own rounding (3 mantissa
// bits), so they skip under it.
#define SKIP_WITH_FP8_CACHE()                                                                  \
  do {                                                                                         \
    if (fp8_cache())                                                                           \
      GTEST_SKIP() << "fp8 KV cache: held to bf16's noise against transformers; fp8's error "  \
                      "is scripts/check_fp8_kv_vs_transformers.py's (against our bf16 cache)"; \
  } while (0)

struct TopEntry {
  int32_t token;
  double logprob;
};

// One generated token and the top-5 of the distribution it was picked from.
struct GreedyStep {
  int32_t token;
  std::vector<TopEntry> top;
};

struct RefRun {
  std::vector<std::vector<TopEntry>> teacher_forced_top5;  // [prompt len][5]
  std::vector<GreedyStep> greedy;                          // [steps]
  std::vector<std::vector<double>> logprobs_at_fp32_top5;  // bf16 run only: [prompt len][5]
};

struct RefPrompt {
  std::string name;
  std::vector<int32_t> ids;
  int perturbed_of = -1;  // index of the prompt this one copies with token 1 changed
  RefRun fp32, bf16;
};

// transformers BF16 against transformers FP32 on the same prompts (the noise yardstick).
struct HfStats {
  double top1_agreement = 0, dev_max = 0, dev_mean = 0, dev_p99 = 0, greedy_mean_agreed = 0;
  int greedy_close_ok = 0, greedy_prompts = 0;
};

struct Reference {
  std::string preset;
  int steps = 0;
  HfStats hf;
  std::vector<RefPrompt> prompts;
};

inline std::vector<TopEntry> parse_top(const nlohmann::json& row) {
  std::vector<TopEntry> out;
  for (const auto& e : row) out.push_back({e.at(0).get<int32_t>(), e.at(1).get<double>()});
  return out;
}

inline RefRun parse_run(const nlohmann::json& j) {
  RefRun r;
  for (const auto& row : j.at("teacher_forced_top5"))
    r.teacher_forced_top5.push_back(parse_top(row));
  for (const auto& s : j.at("greedy"))
    r.greedy.push_back({s.at("token").get<int32_t>(), parse_top(s.at("top5"))});
  if (j.contains("logprobs_at_fp32_top5"))
    r.logprobs_at_fp32_top5 = j.at("logprobs_at_fp32_top5").get<std::vector<std::vector<double>>>();
  return r;
}

// Throws std::runtime_error naming the file and what is wrong with it.
inline Reference load_reference(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    Reference ref;
    ref.preset = j.at("mkmodel").value("preset", std::string("?"));
    ref.steps = j.at("steps").get<int>();
    const auto& s = j.at("hf_bf16_vs_fp32");
    ref.hf.top1_agreement = s.at("top1_agreement").get<double>();
    ref.hf.dev_max = s.at("logprob_abs_dev_max").get<double>();
    ref.hf.dev_mean = s.at("logprob_abs_dev_mean").get<double>();
    ref.hf.dev_p99 = s.at("logprob_abs_dev_p99").get<double>();
    ref.hf.greedy_mean_agreed = s.at("greedy_mean_agreed_tokens").get<double>();
    ref.hf.greedy_close_ok = s.at("greedy_close_ok").get<int>();
    ref.hf.greedy_prompts = s.at("greedy_prompts").get<int>();
    for (const auto& p : j.at("prompts")) {
      RefPrompt rp;
      rp.name = p.at("name").get<std::string>();
      rp.ids = p.at("ids").get<std::vector<int32_t>>();
      rp.perturbed_of = p.at("perturbed_of").get<int>();
      rp.fp32 = parse_run(p.at("fp32"));
      rp.bf16 = parse_run(p.at("bf16"));
      if (rp.fp32.teacher_forced_top5.size() != rp.ids.size())
        throw std::runtime_error("prompt " + rp.name +
                                 ": teacher_forced_top5 length differs from ids");
      ref.prompts.push_back(std::move(rp));
    }
    return ref;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path.string() + ": " + e.what());
  }
}

// Logits [S, V] f32 (host or device view, rows possibly strided) -> host [S * V].
inline std::vector<float> logits_to_host(const TensorView& logits) {
  const int64_t s = logits.size(0), v = logits.size(1);
  std::vector<float> out(static_cast<size_t>(s * v));
  const size_t row_bytes = static_cast<size_t>(v) * sizeof(float);
  const size_t pitch = static_cast<size_t>(logits.stride[0]) * sizeof(float);
  if (logits.on_cpu()) {
    for (int64_t r = 0; r < s; ++r)
      std::copy_n(static_cast<const float*>(logits.data) + r * logits.stride[0], v,
                  out.data() + r * v);
  } else {
    // The runner's stream may be non-blocking: wait for everything before copying.
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy2D(out.data(), row_bytes, logits.data, pitch, row_bytes, s,
                            cudaMemcpyDeviceToHost));
  }
  return out;
}

// One row of logits [V] and its log-sum-exp: logprobs on demand, without a [V] copy (the
// host side must keep up with 36 rows x 152k per decode step).
struct LogitRow {
  const float* row;
  int64_t v;
  double lse;
  LogitRow(const float* r, int64_t n) : row(r), v(n) {
    const float mx = *std::max_element(row, row + v);
    double sum = 0.0;
    for (int64_t i = 0; i < v; ++i) sum += std::exp(row[i] - mx);
    lse = mx + std::log(sum);
  }
  double logprob(int32_t token) const { return row[token] - lse; }
  // The k largest, best first (ties: lower id first).
  std::vector<TopEntry> top(int k) const {
    std::vector<int32_t> best;  // [<= k] token ids, sorted by logit descending
    for (int64_t i = 0; i < v; ++i) {
      if (static_cast<int>(best.size()) == k && row[i] <= row[best.back()]) continue;
      auto it = std::upper_bound(best.begin(), best.end(), row[i],
                                 [&](float x, int32_t t) { return x > row[t]; });
      best.insert(it, static_cast<int32_t>(i));
      if (static_cast<int>(best.size()) > k) best.pop_back();
    }
    std::vector<TopEntry> out;
    for (int32_t t : best) out.push_back({t, logprob(t)});
    return out;
  }
};

inline bool contains_token(const std::vector<TopEntry>& top, int32_t token) {
  return std::any_of(top.begin(), top.end(), [&](const TopEntry& e) { return e.token == token; });
}

// vLLM's check_logprobs_close: tokens equal until the first mismatch, where each side's
// token must be in the other's top-5; nothing after it is compared (the contexts differ).
struct GreedyMatch {
  bool ok = true;
  int agreed = 0;  // equal leading tokens
};
inline GreedyMatch greedy_close(const std::vector<GreedyStep>& a,
                                const std::vector<GreedyStep>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i].token != b[i].token)
      return {contains_token(b[i].top, a[i].token) && contains_token(a[i].top, b[i].token),
              static_cast<int>(i)};
  return {true, static_cast<int>(n)};
}

// Executes each step like ModelRunner::execute (run_model, then sample) and records, per
// row's seed and sampled position, the sampled token and the top-5 of its row. Give every
// request its own seed to tell them apart.
class RecordingStepExecutor final : public StepExecutor {
 public:
  explicit RecordingStepExecutor(ModelRunner& runner) : runner_(runner) {}

  int num_kv_blocks() const override { return runner_.num_kv_blocks(); }

  StepResult execute(const StepCommand& cmd) override {
    if (cmd.kind == StepKind::kExit) return {};
    const TensorView logits = runner_.run_model(cmd);        // [S, V] f32
    if (cmd.logits_indices.empty()) return {};               // chunks short of their prompts' end
    const std::vector<float> host = logits_to_host(logits);  // before sampling touches it
    std::vector<int32_t> tokens = runner_.sample(cmd, logits);
    CHECK_EQ(tokens.size(), cmd.sample_slots.size());
    for (const SlotSamplingParams& p : cmd.new_slot_params) slot_seeds_[p.slot] = p.seed;
    const int64_t v = logits.size(1);
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::vector<TopEntry> top = LogitRow(host.data() + i * v, v).top(5);
      const uint64_t seed = slot_seeds_.at(cmd.sample_slots[i]);
      const int32_t position = cmd.positions[cmd.logits_indices[i]] + 1;  // the sampled token's
      // A later write (a recompute after preemption) wins.
      steps_[seed][position] = {tokens[i], top};
      // Greedy: the sampler's token is the row's argmax (up to an exact tie).
      if (tokens[i] != top[0].token && top[0].logprob > top[1].logprob) ++argmax_mismatches_;
    }
    return StepResult{std::move(tokens)};
  }

  // The steps of the request sampled with `seed`, from its first completion token on.
  std::vector<GreedyStep> completion_steps(uint64_t seed, int prompt_len) const {
    std::vector<GreedyStep> out;
    for (const auto& [position, step] : steps_.at(seed))
      if (position >= prompt_len) out.push_back(step);
    return out;
  }
  int argmax_mismatches() const { return argmax_mismatches_; }

 private:
  ModelRunner& runner_;
  std::map<uint64_t, std::map<int32_t, GreedyStep>> steps_;  // seed -> position -> step
  std::map<int32_t, uint64_t> slot_seeds_;                   // sampling slot -> its seed
  int argmax_mismatches_ = 0;
};

}  // namespace nanovllm::gpu_test
