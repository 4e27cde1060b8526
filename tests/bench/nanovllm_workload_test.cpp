// bench/data/nanovllm_workload.jsonl is nano-vllm's bench.py workload as drawn by Python's
// Mersenne Twister (scripts/make_nanovllm_workload.py). The literals below were printed by
// that script; the two sums are the ones nano-vllm's numbers are quoted with.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

struct Workload {
  std::vector<nlohmann::json> lines;
};

Workload read_workload() {
  const std::string path = std::string(NANOVLLM_SOURCE_DIR) + "/bench/data/nanovllm_workload.jsonl";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  Workload w;
  std::string line;
  while (std::getline(in, line)) w.lines.push_back(nlohmann::json::parse(line));
  return w;
}

TEST(NanovllmWorkload, CheckSumsOfPythonsDraw) {
  const Workload w = read_workload();
  ASSERT_EQ(w.lines.size(), 256u);
  int64_t sum_max_tokens = 0, sum_prompt = 0;
  size_t min_len = std::numeric_limits<size_t>::max(), max_len = 0;
  for (const nlohmann::json& r : w.lines) {
    const size_t len = r.at("prompt_token_ids").size();
    sum_prompt += static_cast<int64_t>(len);
    min_len = std::min(min_len, len);
    max_len = std::max(max_len, len);
    sum_max_tokens += r.at("max_tokens").get<int64_t>();
  }
  EXPECT_EQ(sum_max_tokens, 133966);
  EXPECT_EQ(sum_prompt, 142827);
  EXPECT_EQ(min_len, 107u);
  EXPECT_EQ(max_len, 1024u);

  const nlohmann::json& first = w.lines.front();
  EXPECT_EQ(first.at("prompt_token_ids").size(), 964u);
  const std::vector<int32_t> head(first.at("prompt_token_ids").begin(),
                                  first.at("prompt_token_ids").begin() + 5);
  EXPECT_EQ(head, (std::vector<int32_t>{6311, 6890, 663, 4242, 8376}));
  EXPECT_EQ(first.at("max_tokens").get<int64_t>(), 845);
}

TEST(NanovllmWorkload, EveryLineIsAPromptsJsonlRequest) {
  const Workload w = read_workload();
  ASSERT_EQ(w.lines.size(), 256u);
  for (size_t i = 0; i < w.lines.size(); ++i) {
    const nlohmann::json& r = w.lines[i];
    SCOPED_TRACE("line " + std::to_string(i + 1));
    EXPECT_EQ(r.size(), 5u);  // id, prompt_token_ids, max_tokens, temperature, ignore_eos
    EXPECT_EQ(r.at("id").get<std::string>(), "nanovllm-" + std::to_string(i));
    EXPECT_DOUBLE_EQ(r.at("temperature").get<double>(), 0.6);
    EXPECT_TRUE(r.at("ignore_eos").get<bool>());
    const int64_t max_tokens = r.at("max_tokens").get<int64_t>();
    EXPECT_GE(max_tokens, 100);
    EXPECT_LE(max_tokens, 1024);
    const nlohmann::json& ids = r.at("prompt_token_ids");
    EXPECT_GE(ids.size(), 100u);
    EXPECT_LE(ids.size(), 1024u);
    for (const nlohmann::json& id : ids) {
      ASSERT_TRUE(id.is_number_integer());
      ASSERT_GE(id.get<int64_t>(), 0);
      ASSERT_LE(id.get<int64_t>(), 10000);  // randint(0, 10000) includes both ends
    }
  }
}

}  // namespace
