// nanovllm-launch with chunked prefill on the CPU backend: a prompt several times the step
// budget gives the same greedy tokens as one unchunked prefill, at --tp 1 and --tp 2, in
// mixed and (through the engine default) pure steps.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

// A ~700-token prompt (5x the 128-token budget below) and three short ones.
std::string prompts() {
  std::string longer;
  for (int i = 0; i < 60; ++i) longer += "The river bends past the mill and the old stone bridge. ";
  std::string lines = R"({"id": "long", "prompt": ")" + longer +
                      R"(", "max_tokens": 12, "temperature": 0})"
                      "\n";
  for (const char* p : {"Hello there", "Once upon a time", "The capital of France is"})
    lines += std::string(R"({"id": ")") + p + R"(", "prompt": ")" + p +
             R"(", "max_tokens": 12, "temperature": 0})"
             "\n";
  return lines;
}

std::map<std::string, Json> run(const std::string& tag, std::vector<std::string> flags) {
  const fs::path out = work_dir() / (tag + ".out.jsonl");
  flags.insert(flags.end(), {"--max-model-len", "1024", "-o", out.string()});
  const Launch l = spawn(write_file(tag + ".jsonl", prompts()), tag, flags);
  EXPECT_EQ(finish(l), 0) << read_text(l.err);
  return fs::exists(out) ? by_id(read_jsonl(out)) : std::map<std::string, Json>{};
}

TEST(LaunchChunkedPrefill, ChunkedGreedyTokensEqualOneUnchunkedPrefillAtTpOneAndTwo) {
  REQUIRE_TOKENIZER();
  const auto whole = run("unchunked", {"--tp", "1", "--no-enable-chunked-prefill",
                                       "--max-num-batched-tokens", "1024"});
  ASSERT_EQ(whole.size(), 4u);
  EXPECT_GE(whole.at("long")["prompt_tokens"].get<int>(), 5 * 128);
  for (const auto& [tag, flags] : std::map<std::string, std::vector<std::string>>{
           {"chunked-tp1", {"--tp", "1", "--max-num-batched-tokens", "128"}},
           {"chunked-tp2", {"--tp", "2", "--max-num-batched-tokens", "128"}},
           {"chunked-threshold",
            {"--tp", "1", "--max-num-batched-tokens", "128", "--long-prefill-token-threshold",
             "48"}}}) {
    const auto chunked = run(tag, flags);
    ASSERT_EQ(chunked.size(), 4u) << tag;
    for (const auto& [id, line] : whole)
      EXPECT_EQ(chunked.at(id)["token_ids"], line["token_ids"]) << tag << " " << id;
  }
}

}  // namespace
}  // namespace nanovllm::testing
