// nanovllm-mkmodel: writes a Hugging Face model folder with the exact shapes of a Qwen3
// model (or a tiny test model) and deterministic pseudo-random BF16 weights, since no real
// checkpoint can be downloaded where tests and benchmarks run.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>

#include "layers/model_presets.h"
#include "layers/model_tensors.h"
#include "layers/model_writer.h"

namespace {

constexpr const char* kFooter =
    R"(Weights are not N(0, 0.02) like a fresh transformers model, whose next-token
distributions are nearly flat. They are scaled so that comparisons between two
implementations are stable and attention visibly matters:
 - embeddings have std 1, so logits = h . E^T spread by ~sqrt(hidden) and the
   current token's own embedding gives its logit a large lead: distributions are
   sharply peaked (tiny: bf16 and fp32 argmax agree everywhere, top-1/top-2 gap
   >= 12 nats at 99% of positions), though greedy text tends to repeat a token;
 - an untied lm_head is the embedding plus N(0, 0.5^2) noise (a separate tensor);
 - q_norm/k_norm weights are ~2, so attention is sharp and content-dependent:
   changing one early token moves the last position's logprobs by many nats;
 - other projections have unit gain (std 1/sqrt(fan_in)), norms weight ~1 with
   a little jitter.
Element i of tensor T is a hash of (seed, T, i): the same preset and seed give
byte-identical files on any machine and with any thread count.)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a Qwen3 model folder with deterministic random weights", "nanovllm-mkmodel"};
  app.footer(kFooter);
  std::string preset;
  uint64_t seed = 0;
  std::string tokenizer_dir;
  std::string max_shard = "2GB";
  std::string out_dir;
  int threads = 2;
  app.add_option("--preset", preset, "model shape")
      ->required()
      ->check(CLI::IsMember(nanovllm::model_preset_names()));
  app.add_option("--seed", seed, "weight seed")->required();
  app.add_option("--tokenizer-dir", tokenizer_dir,
                 "copy tokenizer.json, tokenizer_config.json (and vocab.json, merges.txt if "
                 "present) from this folder")
      ->check(CLI::ExistingDirectory);
  app.add_option("--max-shard-size", max_shard,
                 "split weights into shards of at most this size (2GB = 2e9 bytes, 1GiB = 2^30)")
      ->capture_default_str();
  app.add_option("--threads", threads, "generator threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("OUT_DIR", out_dir, "folder to write (created if missing)")->required();
  CLI11_PARSE(app, argc, argv);

  try {
    nanovllm::ModelWriterOptions options;
    options.preset = preset;
    options.seed = seed;
    options.threads = threads;
    options.max_shard_bytes = nanovllm::parse_byte_size(max_shard);
    if (!tokenizer_dir.empty()) options.tokenizer_dir = tokenizer_dir;
    const nanovllm::ModelConfig& config = nanovllm::model_preset(preset);
    spdlog::info("{}: {} parameters, seed {}", preset, nanovllm::parameter_count(config), seed);
    nanovllm::write_model_folder(config, out_dir, options);
    spdlog::info("wrote {}", out_dir);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 0;
}
