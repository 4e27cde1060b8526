#include "bench/nanovllm_bench_workloads.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <stdexcept>

#include "bench/python_random.h"
#include "engine/sampling_defaults.h"

namespace nanovllm::bench {

namespace {

constexpr float kWorkloadTemperature = 0.6f;  // bench.py's only sampling setting
constexpr int64_t kRandomIdRange = 10000;     // bench.py: randint(0, 10000)

std::vector<int32_t> random_ids(std::mt19937_64& rng, int64_t n, int64_t vocab_size) {
  std::uniform_int_distribution<int32_t> id(
      0, static_cast<int32_t>(std::min(kRandomIdRange, vocab_size) - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));  // [n]
  for (int32_t& t : ids) t = id(rng);
  return ids;
}

SamplingOverrides workload_sampling(int max_tokens) {
  SamplingOverrides s;
  s.temperature = kWorkloadTemperature;
  s.max_tokens = max_tokens;
  s.ignore_eos = true;
  return s;
}

void set_if(auto& field, const auto& value) {
  if (value) field = *value;
}

}  // namespace

int64_t Workload::num_requests() const {
  return static_cast<int64_t>(requests.size() + late_requests.size());
}

int64_t Workload::prompt_tokens() const {
  int64_t n = 0;
  for (const auto* list : {&requests, &late_requests})
    for (const BenchRequest& r : *list) n += static_cast<int64_t>(r.prompt.size());
  return n;
}

int64_t Workload::max_output_tokens() const {
  int64_t n = 0;
  for (const auto* list : {&requests, &late_requests})
    for (const BenchRequest& r : *list) n += r.params.max_tokens;
  return n;
}

int64_t Workload::longest_sequence() const {
  int64_t n = 0;
  for (const auto* list : {&requests, &late_requests})
    for (const BenchRequest& r : *list)
      n = std::max(n, static_cast<int64_t>(r.prompt.size()) + r.params.max_tokens);
  return n;
}

int64_t scaled_length(int64_t n, double scale) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(n) * scale)));
}

SamplingChoice sampling_choice(const BenchOptions& o) {
  SamplingChoice c;
  if (o.sampling == SamplingMode::kModelDefaults)
    c.model_defaults = load_generation_config(o.model);
  c.flags = o.sampling_flags;
  return c;
}

SamplingParams resolve_params(const SamplingOverrides& workload, const SamplingChoice& choice) {
  SamplingParams p;
  set_if(p.temperature, workload.temperature);
  set_if(p.max_tokens, workload.max_tokens);
  set_if(p.ignore_eos, workload.ignore_eos);
  // Lengths are the workload's: only the distribution's settings come from the levels above.
  for (const SamplingOverrides* level : {&choice.model_defaults, &choice.flags}) {
    set_if(p.temperature, level->temperature);
    set_if(p.top_k, level->top_k);
    set_if(p.top_p, level->top_p);
    set_if(p.min_p, level->min_p);
  }
  return p;
}

Workload nanovllm_workload(const std::filesystem::path& file, int max_requests, double token_scale,
                           const SamplingChoice& choice) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read the workload file " + file.string());
  Workload w{"nanovllm", "nanovllm"};
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (max_requests > 0 && static_cast<int>(w.requests.size()) == max_requests) break;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      std::vector<int32_t> prompt = j.at("prompt_token_ids").get<std::vector<int32_t>>();
      prompt.resize(
          static_cast<size_t>(scaled_length(static_cast<int64_t>(prompt.size()), token_scale)));
      SamplingOverrides s = workload_sampling(
          static_cast<int>(scaled_length(j.at("max_tokens").get<int64_t>(), token_scale)));
      if (j.contains("temperature")) s.temperature = j.at("temperature").get<float>();
      w.requests.push_back(BenchRequest{std::move(prompt), resolve_params(s, choice)});
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(file.string() + ":" + std::to_string(number) + ": " + e.what());
    }
  }
  if (w.requests.empty()) throw std::runtime_error("no requests in " + file.string());
  w.shape = {{"file", file.filename().string()},
             {"max_requests", max_requests},
             {"token_scale", token_scale}};
  return w;
}

Workload fixed_workload(int num_seqs, int input_len, int output_len, int64_t vocab_size,
                        const SamplingChoice& choice) {
  Workload w{"fixed n=" + std::to_string(num_seqs), "fixed"};
  std::mt19937_64 rng(1000 + static_cast<uint64_t>(num_seqs));
  const SamplingParams params = resolve_params(workload_sampling(output_len), choice);
  for (int i = 0; i < num_seqs; ++i)
    w.requests.push_back(BenchRequest{random_ids(rng, input_len, vocab_size), params});
  w.shape = {{"num_seqs", num_seqs}, {"input_len", input_len}, {"output_len", output_len}};
  return w;
}

Workload latency_workload(int input_len, int output_len, int64_t vocab_size,
                          const SamplingChoice& choice) {
  Workload w = fixed_workload(1, input_len, output_len, vocab_size, choice);
  w.name = w.kind = "latency";
  return w;
}

Workload shared_prefix_workload(int num_requests, int prefix_len, int suffix_len, int output_len,
                                int64_t vocab_size, const SamplingChoice& choice) {
  Workload w{"shared-prefix", "shared-prefix"};
  std::mt19937_64 rng(2000);
  const std::vector<int32_t> prefix = random_ids(rng, prefix_len, vocab_size);  // [prefix_len]
  const SamplingParams params = resolve_params(workload_sampling(output_len), choice);
  for (int i = 0; i < num_requests; ++i) {
    std::vector<int32_t> prompt = prefix;
    const std::vector<int32_t> own = random_ids(rng, suffix_len, vocab_size);
    prompt.insert(prompt.end(), own.begin(), own.end());
    w.requests.push_back(BenchRequest{std::move(prompt), params});
  }
  w.shape = {{"num_requests", num_requests},
             {"prefix_len", prefix_len},
             {"suffix_len", suffix_len},
             {"output_len", output_len}};
  return w;
}

Workload long_workload(int64_t vocab_size, const SamplingChoice& choice) {
  constexpr int kRequests = 64;
  Workload w{"long", "long"};
  PythonRandom rng(0);
  std::vector<std::vector<int32_t>> prompts(kRequests);
  for (std::vector<int32_t>& prompt : prompts) {
    prompt.resize(static_cast<size_t>(rng.randint(4096, 32768)));
    for (int32_t& id : prompt) {
      const int64_t drawn = rng.randint(0, kRandomIdRange);  // 10000 included, as in Python
      id = static_cast<int32_t>(drawn < vocab_size ? drawn : drawn % vocab_size);
    }
  }
  for (std::vector<int32_t>& prompt : prompts) {
    const SamplingOverrides s = workload_sampling(static_cast<int>(rng.randint(64, 512)));
    w.requests.push_back(BenchRequest{std::move(prompt), resolve_params(s, choice)});
  }
  w.skip_when_too_long = true;
  w.count_prefill_flops = true;
  w.shape = {{"num_requests", kRequests},
             {"prompt_len", {4096, 32768}},
             {"max_tokens", {64, 512}},
             {"seed", 0}};
  return w;
}

Workload interference_workload(const InterferenceShape& shape, int64_t vocab_size,
                               const SamplingChoice& choice) {
  Workload w{"interference", "interference"};
  std::mt19937_64 rng(3000);
  const SamplingParams running =
      resolve_params(workload_sampling(shape.running_output_len), choice);
  for (int i = 0; i < shape.num_running; ++i)
    w.requests.push_back(
        BenchRequest{random_ids(rng, shape.running_prompt_len, vocab_size), running});
  w.late_requests.push_back(
      BenchRequest{random_ids(rng, shape.late_prompt_len, vocab_size),
                   resolve_params(workload_sampling(shape.late_output_len), choice)});
  w.late_after_tokens = shape.late_after_tokens;
  w.skip_when_too_long = true;
  w.shape = {{"num_running", shape.num_running},
             {"running_prompt_len", shape.running_prompt_len},
             {"running_output_len", shape.running_output_len},
             {"late_prompt_len", shape.late_prompt_len},
             {"late_output_len", shape.late_output_len},
             {"late_after_tokens", shape.late_after_tokens}};
  return w;
}

std::vector<Workload> make_workloads(const BenchOptions& o, int64_t vocab_size) {
  const SamplingChoice choice = sampling_choice(o);
  std::vector<Workload> out;
  if (o.runs_workload("nanovllm"))
    out.push_back(nanovllm_workload(o.workload_file, o.max_requests, o.token_scale, choice));
  if (o.runs_workload("nanovllm-cpu")) {
    out.push_back(
        nanovllm_workload(o.workload_file, o.cpu_max_requests, o.cpu_token_scale, choice));
    out.back().name = "nanovllm-cpu";
  }
  if (o.runs_workload("fixed"))
    for (const int n : o.num_seqs)
      out.push_back(fixed_workload(n, o.input_len, o.output_len, vocab_size, choice));
  if (o.runs_workload("latency"))
    out.push_back(latency_workload(o.input_len, o.output_len, vocab_size, choice));
  if (o.runs_workload("shared-prefix"))
    out.push_back(shared_prefix_workload(o.prefix_requests, o.prefix_len, o.suffix_len,
                                         o.prefix_output_len, vocab_size, choice));
  if (o.runs_workload("long")) out.push_back(long_workload(vocab_size, choice));
  if (o.runs_workload("interference"))
    out.push_back(interference_workload(InterferenceShape{}, vocab_size, choice));
  // --seed: request i samples with seed + i (unset: the engine derives one from its id).
  // Late requests number after the others, as the engine numbers them.
  if (o.sampling_flags.seed)
    for (Workload& w : out) {
      size_t i = 0;
      for (auto* list : {&w.requests, &w.late_requests})
        for (BenchRequest& r : *list) r.params.seed = *o.sampling_flags.seed + i++;
    }
  for (Workload& w : out)
    for (auto* list : {&w.requests, &w.late_requests})
      for (BenchRequest& r : *list) {
        r.params.stop = o.stop;
        r.params.logprobs = o.logprobs;
        r.params.presence_penalty = o.presence_penalty;
        r.params.frequency_penalty = o.frequency_penalty;
        r.params.repetition_penalty = o.repetition_penalty;
      }
  return out;
}

}  // namespace nanovllm::bench
