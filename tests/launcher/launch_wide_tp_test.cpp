// --tp 4 and --tp 8 on the CPU backend reproduce --tp 1 token for token (greedy, seeded
// sampling, n > 1): the shape is tiny-128's (8 q heads, 2 kv heads: at tp 4 and 8 each kv
// head is replicated over 2 and 4 ranks, every rank holds 2 or 1 q heads, the vocabulary and
// the MLP split 8 ways), what the 14B and 32B shapes do at tp 8 on GPUs.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

// (id, completion index) -> token ids.
std::map<std::pair<std::string, int>, Json> tokens_of(const fs::path& out) {
  std::map<std::pair<std::string, int>, Json> m;
  for (const Json& j : read_jsonl(out))
    m[{j["id"].get<std::string>(), j["index"].get<int>()}] = j["token_ids"];
  return m;
}

TEST(LaunchWideTensorParallel, Tp4AndTp8ReproduceTp1OnAShapeThatSplitsEightWays) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = write_file(
      "wide.jsonl",
      R"({"id": "greedy", "prompt": "The capital of France is", "max_tokens": 6, "temperature": 0})"
      "\n"
      R"({"id": "seeded", "prompt": "Once upon a time", "max_tokens": 6, "temperature": 30, "top_k": 50, "seed": 4})"
      "\n"
      R"({"id": "many", "prompt": "Count:", "max_tokens": 5, "temperature": 30, "top_k": 50, "seed": 9, "n": 2})"
      "\n");
  std::map<int, std::map<std::pair<std::string, int>, Json>> by_tp;
  for (int tp : {1, 4, 8}) {
    const fs::path out = work_dir() / ("wide-tp" + std::to_string(tp) + ".out");
    const Launch l =
        spawn_with_model(preset_model("tiny-128", 3), prompts, "wide-tp" + std::to_string(tp),
                         {"--tp", std::to_string(tp), "-o", out.string()});
    ASSERT_EQ(finish(l), 0) << run_args(l);
    by_tp[tp] = tokens_of(out);
  }
  ASSERT_EQ(by_tp[1].size(), 4u);
  EXPECT_EQ(by_tp[4], by_tp[1]);
  EXPECT_EQ(by_tp[8], by_tp[1]);
}

}  // namespace
}  // namespace nanovllm::testing
