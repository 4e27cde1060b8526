// nanovllm-launch's output on the bundled examples (text, token-id, chat and OpenAI batch
// lines) is pinned: tests/fixtures/launch/examples_results.jsonl was written by the launcher
// as it was before the engine/worker restructure (commit 977314c, tiny model seed 1, the flags
// below, --tp 1 and --tp 2 giving the same), with the fields that are random by design removed
// (OpenAI batch ids and request ids, `created`); the `index` and `stop_reason` fields (issue
// 16) were added to it since (0 and null everywhere). Any change of behaviour shows here.
#include <gtest/gtest.h>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

// Keyed by id / custom_id, without the fields a run draws at random.
std::map<std::string, Json> normalized(const std::vector<Json>& lines) {
  std::map<std::string, Json> out;
  for (Json line : lines) {
    if (line.contains("custom_id")) {
      line.erase("id");
      Json& response = line["response"];
      if (response.is_object()) {
        response.erase("request_id");
        if (response.contains("body") && response["body"].is_object()) {
          response["body"].erase("id");
          response["body"].erase("created");
        }
      }
      out[line["custom_id"].get<std::string>()] = line;
    } else {
      out[line["id"].get<std::string>()] = line;
    }
  }
  return out;
}

TEST(LaunchGolden, ExamplesGiveTheSameResultsAsBeforeTheRestructureAtTp1AndTp2) {
  REQUIRE_TOKENIZER();
  const std::map<std::string, Json> expected = normalized(
      read_jsonl(fs::path(NANOVLLM_SOURCE_DIR) / "tests/fixtures/launch/examples_results.jsonl"));
  ASSERT_EQ(expected.size(), 16u);
  for (const char* tp : {"1", "2"}) {
    const fs::path out = work_dir() / (std::string("golden-tp") + tp + ".jsonl");
    const Launch l =
        spawn(fs::path(NANOVLLM_SOURCE_DIR) / "examples/prompts.jsonl", std::string("golden-") + tp,
              {"--tp", tp, "--max-model-len", "1024", "--max-num-batched-tokens", "1024",
               "--block-size", "256", "--num-gpu-blocks-override", "96", "-o", out.string()});
    ASSERT_EQ(finish(l), 0) << run_args(l);
    const std::map<std::string, Json> got = normalized(read_jsonl(out));
    ASSERT_EQ(got.size(), expected.size()) << "--tp " << tp;
    for (const auto& [id, want] : expected) {
      ASSERT_TRUE(got.contains(id)) << id;
      EXPECT_EQ(got.at(id), want) << "--tp " << tp << ", request " << id;
    }
  }
}

}  // namespace
}  // namespace nanovllm::testing
