// nanovllm-launch against what a hostile or careless user does: empty inputs, files that are
// not what they should be, limits that can never work. Each case names what it pins; each
// failed before the hardening pass.
#include <gtest/gtest.h>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

TEST(LaunchHardening, EmptyOrBlankInputWarnsNoRequestsAndExitsZeroWithoutLoadingTheModel) {
  REQUIRE_TOKENIZER();
  const fs::path empty = write_file("empty.jsonl", "");
  const fs::path blank = write_file("blank.jsonl", "\n   \n\r\n");
  for (const fs::path& prompts : {empty, blank})
    for (const char* tp : {"1", "2"}) {
      const std::string tag = prompts.stem().string() + "-tp" + tp;
      const Launch l =
          spawn(prompts, tag, {"--tp", tp, "-o", (work_dir() / (tag + ".out")).string()});
      EXPECT_EQ(finish(l), 0) << run_args(l);
      const std::string err = read_text(l.err);
      EXPECT_NE(err.find("no requests to run in"), std::string::npos) << err;
      EXPECT_EQ(err.find("model loaded"), std::string::npos) << err;
      EXPECT_TRUE(segments(l.prefix).empty());
    }
}

TEST(LaunchHardening, OnlyBadLinesWriteTheirErrorsAndDismissTheWorkersWithoutAModel) {
  REQUIRE_TOKENIZER();
  const fs::path prompts =
      write_file("all-bad.jsonl", "{\"id\": \"x\", \"prompt\": \"Hi\", \"top_p\": 7}\nnot json\n");
  const fs::path out = work_dir() / "all-bad.out";
  const Launch l = spawn(prompts, "all-bad", {"--tp", "2", "-o", out.string()});
  EXPECT_EQ(finish(l), 1) << run_args(l);
  const auto results = read_jsonl(out);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0]["finish_reason"], "error");
  EXPECT_EQ(results[1]["id"], "line-2");  // a generated id
  const std::string err = read_text(l.err);
  EXPECT_EQ(err.find("rank 0: model loaded"), std::string::npos) << err;
  EXPECT_EQ(err.find("was killed"), std::string::npos) << err;  // the worker left cleanly
  EXPECT_TRUE(segments(l.prefix).empty());
}

TEST(LaunchHardening, OutputNamingThePromptsFileExitsTwoAndKeepsTheInput) {
  REQUIRE_TOKENIZER();
  const std::string text = "{\"id\": \"a\", \"prompt\": \"Hi\", \"max_tokens\": 2}\n";
  const fs::path prompts = write_file("same.jsonl", text);
  const fs::path link = work_dir() / "same-link.jsonl";
  fs::remove(link);
  fs::create_symlink(prompts, link);
  for (const fs::path& out : {prompts, link})
    for (const char* extra : {"--tp", "--resume"}) {
      std::vector<std::string> flags{"-o", out.string()};
      if (std::string(extra) == "--resume") flags.push_back("--resume");
      const Launch l = spawn(prompts, "same", flags);
      EXPECT_EQ(finish(l), 2) << run_args(l);
      EXPECT_NE(read_text(l.err).find("is the prompts file"), std::string::npos);
      EXPECT_EQ(read_text(prompts), text);
    }
}

TEST(LaunchHardening, ModelFolderWithoutConfigJsonIsAConfigurationErrorExitTwo) {
  REQUIRE_TOKENIZER();
  const fs::path model = work_dir() / "no-config-model";
  fs::create_directories(model);
  const fs::path prompts = write_file("no-config.jsonl", "{\"prompt\": \"Hi\"}\n");
  const Launch l = spawn_with_model(model, prompts, "no-config", {"--tp", "1"});
  EXPECT_EQ(finish(l), 2) << run_args(l);
  EXPECT_NE(read_text(l.err).find("config.json"), std::string::npos) << read_text(l.err);
  const Launch missing = spawn_with_model(work_dir() / "no-such-model", prompts, "no-model", {});
  EXPECT_EQ(finish(missing), 2) << run_args(missing);
}

}  // namespace
}  // namespace nanovllm::testing
