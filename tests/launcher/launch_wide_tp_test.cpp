// --tp 4 and --tp 8 on the CPU backend reproduce --tp 1 token for token (greedy, seeded
// sampling, n > 1): the shape is tiny-128's (8 q heads, 2 kv heads: at tp 4 and 8 each kv
// head is replicated over 2 and 4 ranks, every rank holds 2 or 1 q heads, the vocabulary and
// the MLP split 8 ways), what the 14B and 32B shapes do at tp 8 on GPUs.
#include <gtest/gtest.h>

#include <map>
#include <regex>
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
      R"({"id": "greedy", "prompt": "The capital of France is", "max_tokens": 6, "ignore_eos": true, "temperature": 0})"
      "\n"
      R"({"id": "seeded", "prompt": "Once upon a time", "max_tokens": 6, "ignore_eos": true, "temperature": 30, "top_k": 50, "seed": 4})"
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

// The run's closing count: (shard-sampled steps, sampling steps, ranks), empty when absent.
std::smatch shard_steps(const std::string& log) {
  static const std::regex re(
      R"((\d+) of (\d+) sampling steps drew their tokens from the (\d+) vocabulary shards)");
  std::smatch m;
  std::regex_search(log, m, re);
  return m;
}

TEST(LaunchWideTensorParallel, SamplingFromShardsDrawsTheGatheredLogitsTokens) {
  // Every rule sampled from shards (greedy, unfiltered, Qwen3's top-k + top-p, top-k + min-p,
  // top_k at the limit), beside rows that need the whole vocabulary (top-p alone, logprobs,
  // a penalty), at --tp 2 and 4: token for token what --disable-shard-sampling draws, and the
  // log says how many steps sampled from shards.
  REQUIRE_TOKENIZER();
  const std::string rules =
      R"({"id": "greedy", "prompt": "The capital of France is", "max_tokens": 8, "ignore_eos": true, "temperature": 0})"
      "\n"
      R"({"id": "unfiltered", "prompt": "Once upon a time", "max_tokens": 8, "ignore_eos": true, "temperature": 1.0, "seed": 4})"
      "\n"
      R"({"id": "qwen", "prompt": "Count:", "max_tokens": 8, "ignore_eos": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "seed": 9, "n": 2})"
      "\n"
      R"({"id": "minp", "prompt": "A story:", "max_tokens": 8, "ignore_eos": true, "temperature": 1.5, "top_k": 40, "min_p": 0.05, "seed": 2})"
      "\n"
      R"({"id": "limit", "prompt": "Hello", "max_tokens": 8, "ignore_eos": true, "temperature": 2.0, "top_k": 64, "top_p": 0.7, "seed": 5})"
      "\n";
  const std::string whole_row =
      R"({"id": "topp", "prompt": "Why", "max_tokens": 6, "ignore_eos": true, "temperature": 0.8, "top_p": 0.9, "seed": 1})"
      "\n"
      R"({"id": "logprobs", "prompt": "Why not", "max_tokens": 6, "ignore_eos": true, "temperature": 0.8, "top_k": 20, "logprobs": 2, "seed": 3})"
      "\n"
      R"({"id": "penalty", "prompt": "Repeat", "max_tokens": 6, "ignore_eos": true, "temperature": 0.8, "top_k": 20, "presence_penalty": 1.0, "seed": 6})"
      "\n";
  const fs::path shards_only = write_file("shards.jsonl", rules);
  const fs::path mixed = write_file("mixed.jsonl", rules + whole_row);
  for (const fs::path& prompts : {shards_only, mixed}) {
    for (const int tp : {2, 4}) {
      std::map<bool, std::map<std::pair<std::string, int>, Json>> by_flag;
      for (const bool disabled : {false, true}) {
        const std::string name = prompts.stem().string() + "-tp" + std::to_string(tp) +
                                 (disabled ? "-gather" : "-shards");
        const fs::path out = work_dir() / (name + ".out");
        std::vector<std::string> args = {"--tp", std::to_string(tp), "-o", out.string()};
        if (disabled) args.push_back("--disable-shard-sampling");
        const Launch l = spawn_with_model(preset_model("tiny-128", 3), prompts, name, args);
        ASSERT_EQ(finish(l), 0) << run_args(l);
        by_flag[disabled] = tokens_of(out);
        const std::string log = read_text(l.err);
        const std::smatch m = shard_steps(log);
        if (disabled) {
          EXPECT_TRUE(m.empty()) << name << ": no shard sampling, no count";
          continue;
        }
        ASSERT_FALSE(m.empty()) << name << ":\n" << log;
        const int shard = std::stoi(m[1]), all = std::stoi(m[2]);
        EXPECT_EQ(std::stoi(m[3]), tp);
        if (prompts == shards_only) {  // the prefill and 7 decodes
          EXPECT_EQ(shard, 8) << name;
          EXPECT_EQ(all, 8) << name;
        } else {  // the steps holding a whole-row sequence gather; the last two do not
          EXPECT_EQ(shard, 2) << name;
          EXPECT_EQ(all, 8) << name;
        }
      }
      ASSERT_EQ(by_flag[false].size(), prompts == mixed ? 9u : 6u);
      EXPECT_EQ(by_flag[false], by_flag[true]) << prompts.stem() << " at tp " << tp;
    }
  }
}

}  // namespace
}  // namespace nanovllm::testing
