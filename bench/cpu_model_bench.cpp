// cpu_model_bench: tokens per second of the CPU backend's whole model (ModelRunner on
// Device::kCpu, --tp 1), for prefill and greedy decode at a few batch sizes and thread counts.
// Writes a random-weight model folder (a preset, seed 1) to a temp dir, or uses --model-dir.
//
//   cpu_model_bench [--preset tiny] [--threads 1,2] [--batch 1,8] [--prompt-len 64]
//                   [--decode-steps 32] [--repeats 3] [--json out.json]
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling_slots.h"
#include "engine/step_builder.h"
#include "kernels/communicator.h"
#include "layers/model_config.h"
#include "layers/model_presets.h"
#include "layers/model_writer.h"
#include "rank/model_runner.h"

namespace nanovllm {
namespace {

constexpr int kBlockSize = 16;

struct Options {
  std::string preset = "tiny";
  std::string model_dir;
  std::vector<int> threads{1, 2};
  std::vector<int> batches{1, 8};
  int prompt_len = 64;
  int decode_steps = 32;
  int repeats = 3;
  std::string json_path;
};

struct Row {
  int threads, batch;
  double prefill_tok_s, decode_tok_s, decode_ms_per_step;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One measurement: prefill `batch` prompts of prompt_len tokens, then decode_steps greedy
// steps; the best of `repeats` runs of each phase (the first run also warms the caches).
Row measure(const std::filesystem::path& dir, const ModelConfig& config, const Options& o,
            int threads, int batch) {
  const int blocks_per_seq = (o.prompt_len + o.decode_steps + kBlockSize - 1) / kBlockSize;
  SingleRankCommunicator comm;
  ModelRunner runner(dir, config, comm,
                     ModelRunnerOptions{.block_size = kBlockSize,
                                        .num_kv_blocks = blocks_per_seq * batch,
                                        .cpu_threads = threads});
  std::mt19937 rng(123);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(config.vocab_size) - 1);
  double best_prefill = 1e30, best_decode = 1e30;
  for (int rep = 0; rep < o.repeats; ++rep) {
    std::vector<std::unique_ptr<Sequence>> owned;
    std::vector<Sequence*> seqs;
    SamplingSlots slots(batch);
    for (int i = 0; i < batch; ++i) {
      std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_len));
      for (auto& t : prompt) t = token(rng);
      SamplingParams p;
      p.temperature = 0.0f;
      p.seed = static_cast<uint64_t>(i);
      owned.push_back(std::make_unique<Sequence>(i, std::move(prompt), p, kBlockSize));
      for (int b = 0; b < blocks_per_seq; ++b)
        owned.back()->block_table.push_back(i * blocks_per_seq + b);
      seqs.push_back(owned.back().get());
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> next =
        runner.execute(build_prefill_command(seqs, kBlockSize, slots, {})).sampled_token_ids;
    best_prefill = std::min(best_prefill, seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    for (int step = 0; step < o.decode_steps; ++step) {
      for (int i = 0; i < batch; ++i) seqs[i]->append_token(next[i]);
      next = runner.execute(build_decode_command(seqs, kBlockSize)).sampled_token_ids;
    }
    best_decode = std::min(best_decode, seconds_since(t0));
  }
  const double decode_tokens = double{1} * batch * o.decode_steps;
  return Row{threads, batch, double{1} * batch * o.prompt_len / best_prefill,
             decode_tokens / best_decode, 1e3 * best_decode / o.decode_steps};
}

int run(const Options& o) {
  const ModelConfig& config = model_preset(o.preset);
  std::filesystem::path dir = o.model_dir;
  std::filesystem::path temp;
  if (dir.empty()) {
    temp = std::filesystem::temp_directory_path() /
           ("nanovllm_cpu_bench_" + o.preset + "_" + std::to_string(std::random_device{}()));
    ModelWriterOptions w;
    w.preset = o.preset;
    w.seed = 1;
    write_model_folder(config, temp, w);
    dir = temp;
  }
  std::vector<Row> rows;
  for (int t : o.threads)
    for (int b : o.batches) rows.push_back(measure(dir, config, o, t, b));
  if (!temp.empty()) std::filesystem::remove_all(temp);

  fmt::print("model {} ({}), prompt {} tokens, {} decode steps, best of {}\n",
             o.model_dir.empty() ? o.preset : o.model_dir, o.preset, o.prompt_len, o.decode_steps,
             o.repeats);
  fmt::print("| threads | batch | prefill tok/s | decode tok/s | decode ms/step |\n");
  fmt::print("| ---: | ---: | ---: | ---: | ---: |\n");
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows) {
    fmt::print("| {} | {} | {:.0f} | {:.1f} | {:.2f} |\n", r.threads, r.batch, r.prefill_tok_s,
               r.decode_tok_s, r.decode_ms_per_step);
    out.push_back({{"threads", r.threads},
                   {"batch", r.batch},
                   {"prefill_tok_s", r.prefill_tok_s},
                   {"decode_tok_s", r.decode_tok_s},
                   {"decode_ms_per_step", r.decode_ms_per_step}});
  }
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path);
    if (!f) throw std::runtime_error("cannot write " + o.json_path);
    f << out.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) {
  CLI::App app{"CPU backend model throughput (prefill and decode tokens per second)",
               "cpu_model_bench"};
  nanovllm::Options o;
  app.add_option("--preset", o.preset, "model shape")
      ->check(CLI::IsMember(nanovllm::model_preset_names()))
      ->capture_default_str();
  app.add_option("--model-dir", o.model_dir, "use this folder (its shape must be --preset's)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--threads", o.threads, "CPU thread counts")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--batch", o.batches, "batch sizes")->delimiter(',')->capture_default_str();
  app.add_option("--prompt-len", o.prompt_len, "prompt tokens per sequence")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--decode-steps", o.decode_steps, "decode steps")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--repeats", o.repeats, "runs per measurement (the best counts)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--json", o.json_path, "also write the table as JSON here");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  try {
    return nanovllm::run(o);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
