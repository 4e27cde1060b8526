// nanovllm-launch end to end on the CPU backend, for the flags of issue 30: prefix caching on
// and off (vLLM's --[no-]enable-prefix-caching), the results file of a run with no requests,
// and the CPU KV cache sized for the request file, as the start-up line says.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

// Two requests with the same 24-token prompt (one full 16-token block to share), run one at
// a time so the second finds the first's blocks.
fs::path repeated_prompt(const std::string& name) {
  const std::string line =
      R"("prompt": "The quick brown fox jumps over the lazy dog while the sun sets slowly )"
      R"(behind the distant purple mountains and the river flows.", "max_tokens": 2, )"
      R"("temperature": 0})";
  return write_file(name, "{\"id\": \"a\", " + line + "\n{\"id\": \"b\", " + line + "\n");
}

std::map<std::string, Json> run_repeated(const std::string& tag, std::vector<std::string> flags) {
  flags.insert(flags.end(),
               {"--max-num-seqs", "1", "-o", (work_dir() / (tag + ".jsonl")).string()});
  const Launch l = spawn(repeated_prompt(tag + ".prompts.jsonl"), tag, flags);
  EXPECT_EQ(finish(l), 0) << run_args(l);
  return by_id(read_jsonl(work_dir() / (tag + ".jsonl")));
}

TEST(LaunchFlags, PrefixCachingServesARepeatedPromptFromTheCacheUnlessTurnedOff) {
  REQUIRE_TOKENIZER();
  for (const std::vector<std::string>& on :
       {std::vector<std::string>{}, std::vector<std::string>{"--enable-prefix-caching"}}) {
    const auto results = run_repeated(on.empty() ? "cache-default" : "cache-on", on);
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results.at("a")["prompt_tokens"], 24);
    EXPECT_EQ(results.at("a")["cached_tokens"], 0);  // the first computes every token
    EXPECT_EQ(results.at("b")["cached_tokens"], 16) << results.at("b").dump();
  }
  const auto off = run_repeated("cache-off", {"--no-enable-prefix-caching"});
  ASSERT_EQ(off.size(), 2u);
  EXPECT_EQ(off.at("a")["cached_tokens"], 0);
  EXPECT_EQ(off.at("b")["cached_tokens"], 0) << off.at("b").dump();
  // The same tokens either way (greedy).
  EXPECT_EQ(off.at("b")["token_ids"], run_repeated("cache-on2", {}).at("b")["token_ids"]);
  EXPECT_NE(read_text(work_dir() / "cache-off.err").find("prefix caching off"), std::string::npos);
}

// A prompts file without requests: exit 0, the model never loaded, and the results file as any
// run leaves it: created or truncated to empty, or under --resume kept as it was.
TEST(LaunchFlags, NoRequestsLeaveTheResultsFileAsAnyOtherRunWould) {
  REQUIRE_TOKENIZER();
  const std::string old_line = R"({"id":"old","index":0,"text":"x","finish_reason":"stop"})";
  int run = 0;
  for (const std::string& text : {std::string(), std::string("\n  \n\t\r\n")}) {
    const fs::path prompts = write_file("empty" + std::to_string(run) + ".jsonl", text);
    const auto launch = [&](const fs::path& out, std::vector<std::string> flags) {
      const std::string tag = "empty-run" + std::to_string(++run);
      flags.insert(flags.begin(), {"-o", out.string()});
      const Launch l = spawn(prompts, tag, flags);
      EXPECT_EQ(finish(l), 0) << run_args(l);
      EXPECT_NE(read_text(l.err).find("no requests to run"), std::string::npos) << run_args(l);
      EXPECT_EQ(read_text(l.err).find("model loaded"), std::string::npos) << run_args(l);
    };
    const fs::path fresh = work_dir() / ("fresh" + std::to_string(run) + ".jsonl");
    launch(fresh, {});
    ASSERT_TRUE(fs::exists(fresh));  // created, empty
    EXPECT_EQ(fs::file_size(fresh), 0u);

    const fs::path earlier =
        write_file("earlier" + std::to_string(run) + ".jsonl", old_line + "\n");
    launch(earlier, {});
    EXPECT_EQ(read_text(earlier), "");  // truncated, as a run with requests would

    const fs::path resumed =
        write_file("resumed" + std::to_string(run) + ".jsonl", old_line + "\n");
    launch(resumed, {"--resume"});
    EXPECT_EQ(read_text(resumed), old_line + "\n");  // kept

    const fs::path missing = work_dir() / ("missing" + std::to_string(run) + ".jsonl");
    launch(missing, {"--resume"});
    EXPECT_TRUE(fs::exists(missing));
    EXPECT_EQ(read_text(missing), "");
  }
}

// Without --cpu-kv-cache-space the CPU cache holds what the requests need: here 4 sequences
// (three lines, one with n 2) of max_model_len 4096 in blocks of 256, 16 blocks each.
TEST(LaunchFlags, CpuKvCacheIsSizedForTheRequestsAndTheStartUpLineSaysSo) {
  REQUIRE_TOKENIZER();
  const fs::path prompts =
      write_file("kv-sizing.jsonl",
                 "{\"id\": \"a\", \"prompt_token_ids\": [9707], \"max_tokens\": 1}\n"
                 "{\"id\": \"b\", \"prompt_token_ids\": [9707, 11], \"max_tokens\": 1}\n\n"
                 "{\"id\": \"c\", \"prompt_token_ids\": [9707], \"max_tokens\": 1, \"n\": 2}\n");
  for (const int tp : {1, 2}) {
    const std::string tag = "kv-sizing-tp" + std::to_string(tp);
    const fs::path out = work_dir() / (tag + ".jsonl");
    const Launch l =
        spawn_plain(tiny_model(), prompts, tag,
                    {"--device", "cpu", "--tp", std::to_string(tp), "-o", out.string()});
    ASSERT_EQ(finish(l), 0) << run_args(l);
    EXPECT_EQ(read_jsonl(out).size(), 4u);
    const std::string err = read_text(l.err);
    // tiny: 2 KiB of K and V a token over its 2 KV heads, so 512 KiB a block, half per rank at
    // tp 2.
    const std::string mib = tp == 1 ? "32.0 MiB" : "16.0 MiB";
    EXPECT_NE(err.find("KV cache: 64 blocks of 256 tokens (" + mib +
                       " per rank, sized for 4 sequences of up to max_model_len 4096 tokens; "
                       "--cpu-kv-cache-space sets it)"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("max_num_seqs 4 (--max-num-seqs 512, lowered to the 4 sequence(s)"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("rank 0: model loaded (4 layers, " + std::to_string(2 / tp) +
                       " kv heads here), KV cache 64 blocks x 256 tokens (" + mib + ")"),
              std::string::npos)
        << err;
    EXPECT_EQ(err.find("sized after warm-up"), std::string::npos) << err;
  }
  // With the flag, exactly what it says: 0.25 GiB / 512 KiB = 512 blocks.
  const Launch l = spawn_plain(tiny_model(), prompts, "kv-sizing-flag",
                               {"--device", "cpu", "--cpu-kv-cache-space", "0.25", "-o",
                                (work_dir() / "kv-sizing-flag.jsonl").string()});
  ASSERT_EQ(finish(l), 0) << run_args(l);
  EXPECT_NE(
      read_text(l.err).find(
          "KV cache: 512 blocks of 256 tokens (256.0 MiB per rank, --cpu-kv-cache-space 0.25)"),
      std::string::npos)
      << run_args(l);
}

}  // namespace
}  // namespace nanovllm::testing
