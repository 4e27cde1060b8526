// --resume: finished ids are skipped, errors retried, a crash's partial line cut away; a
// native n > 1 request runs again only for its completions not yet written.
#include "engine/resume.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "engine/result_writer.h"

namespace nanovllm {
namespace {

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("nanovllm_resume_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl");
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  void write_file(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
  std::string file_text() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Every line of the file must parse on its own and end with a newline.
  std::vector<nlohmann::json> file_lines() const {
    const std::string text = file_text();
    EXPECT_TRUE(text.empty() || text.back() == '\n');
    std::vector<nlohmann::json> lines;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
    return lines;
  }

  std::filesystem::path path_;
};

std::string ok_line(const std::string& id) {
  return R"({"id":")" + id +
         R"(","text":"x","token_ids":[1],"finish_reason":"stop","prompt_tokens":1,)"
         R"("completion_tokens":1,"cached_tokens":0})";
}

std::string ok_line(const std::string& id, int index) {
  std::string line = ok_line(id);
  return line.insert(1, R"("index":)" + std::to_string(index) + ",");
}

Request native_request(const std::string& id, int32_t n) {
  Request r;
  r.id = id;
  r.sampling_params.n = n;
  return r;
}

TEST_F(ResumeTest, MissingOutputFileIsAFreshStart) {
  const ResumeState s = prepare_resume(path_);
  EXPECT_TRUE(s.done_ids.empty());
  EXPECT_FALSE(std::filesystem::exists(path_));
}

TEST_F(ResumeTest, FinishedIdsAreCollectedAndTheFileKept) {
  const std::string text = std::string(ok_line("a")) + "\n" + ok_line("b") + "\n";
  write_file(text);
  const ResumeState s = prepare_resume(path_);
  EXPECT_EQ(s.done_ids, (std::unordered_set<std::string>{"a", "b"}));
  EXPECT_EQ(s.kept_lines, 2);
  EXPECT_FALSE(s.truncated_last_line);
  EXPECT_EQ(file_text(), text);
}

TEST_F(ResumeTest, TruncatedLastLineIsIgnoredAndCutAway) {
  const std::string whole = std::string(ok_line("a")) + "\n";
  const std::string partial = std::string(ok_line("b")).substr(0, 30);
  write_file(whole + partial);
  const ResumeState s = prepare_resume(path_);
  EXPECT_EQ(s.done_ids, (std::unordered_set<std::string>{"a"}));
  EXPECT_TRUE(s.truncated_last_line);
  EXPECT_EQ(file_text(), whole);
}

TEST_F(ResumeTest, CompleteLastLineWithoutNewlineGetsOne) {
  write_file(ok_line("a"));
  const ResumeState s = prepare_resume(path_);
  EXPECT_TRUE(s.done_ids.contains("a"));
  EXPECT_FALSE(s.truncated_last_line);
  EXPECT_EQ(file_lines().size(), 1u);
}

TEST_F(ResumeTest, ErrorResultsAreDroppedSoTheirRequestsAreRetried) {
  const std::string error =
      R"({"id":"e","text":"","token_ids":[],"finish_reason":"error","error":{"message":"m","line":2,"field":null}})";
  const std::string batch_error =
      R"({"id":"batch_req_1","custom_id":"q","response":{"status_code":400,"body":null},"error":{"message":"m"}})";
  const std::string batch_ok =
      R"({"id":"batch_req_2","custom_id":"p","response":{"status_code":200,"body":{}},"error":null})";
  write_file(std::string(ok_line("a")) + "\n" + error + "\n" + batch_error + "\n" + batch_ok +
             "\n" + std::string(ok_line("z")).substr(0, 12));
  const ResumeState s = prepare_resume(path_);
  EXPECT_EQ(s.done_ids, (std::unordered_set<std::string>{"a", "p"}));
  EXPECT_EQ(s.dropped_error_lines, 2);
  EXPECT_TRUE(s.truncated_last_line);
  const auto lines = file_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["id"], "a");
  EXPECT_EQ(lines[1]["custom_id"], "p");
}

TEST_F(ResumeTest, PendingRequestsSkipFinishedOnesOnly) {
  ResumeState s;
  s.done_ids = {"a", "c"};
  s.done_indexes = {{"a", {0}}, {"c", {0}}};
  std::vector<Request> rs(4);
  rs[0].id = "a";
  rs[1].id = "b";
  rs[2].id = "c";
  rs[2].fail("bad now", "prompt");  // an invalid line is answered again, whatever its id
  rs[3].id = "d";
  const auto pending = pending_requests(rs, s);
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[0].id, "b");
  EXPECT_EQ(pending[1].id, "c");
  EXPECT_EQ(pending[2].id, "d");
}

TEST_F(ResumeTest, NativeLinesRecordTheirCompletionIndexesAndALineWithoutOneIsIndexZero) {
  write_file(ok_line("old") + "\n" + ok_line("m", 2) + "\n" + ok_line("m", 0) + "\n");
  const ResumeState s = prepare_resume(path_);
  EXPECT_EQ(s.done_indexes.at("old"), (std::set<int32_t>{0}));
  EXPECT_EQ(s.done_indexes.at("m"), (std::set<int32_t>{0, 2}));
  EXPECT_EQ(s.kept_lines, 3);
}

TEST_F(ResumeTest, NativeRequestWithTwoOfThreeCompletionsIsPendingForTheMissingOneOnly) {
  write_file(ok_line("m", 0) + "\n" + ok_line("m", 2) + "\n" + ok_line("full", 0) + "\n" +
             ok_line("full", 1) + "\n" + ok_line("full", 2) + "\n");
  const ResumeState s = prepare_resume(path_);
  const std::vector<Request> rs = {native_request("m", 3), native_request("full", 3),
                                   native_request("new", 3)};
  const auto pending = pending_requests(rs, s);
  ASSERT_EQ(pending.size(), 2u);  // "full" has all three: done
  EXPECT_EQ(pending[0].id, "m");
  EXPECT_EQ(pending[1].id, "new");
  EXPECT_EQ(written_completions(pending[0], s), (std::vector<int32_t>{0, 2}));  // 1 to run
  EXPECT_TRUE(written_completions(pending[1], s).empty());                      // all 3 to run
}

TEST_F(ResumeTest, OnlyTheMissingCompletionRunsAloneWithItsOwnCompletionSeed) {
  Request r = native_request("m", 3);
  r.sampling_params.seed = 1234;
  r.sampling_params.max_tokens = 9;
  const std::vector<int32_t> written = {0, 2};
  const auto runs = completion_runs(r, written);
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0].index, 1);
  EXPECT_EQ(runs[0].params.n, 1);
  EXPECT_EQ(runs[0].params.seed, completion_seed(1234, 1));  // what completion 1 of 3 samples
  EXPECT_EQ(runs[0].params.max_tokens, 9);
  // Nothing written: one run of all n, as given. Index 0 missing alone keeps the seed itself.
  const auto whole = completion_runs(r, {});
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_FALSE(whole[0].index.has_value());
  EXPECT_EQ(whole[0].params.n, 3);
  EXPECT_EQ(whole[0].params.seed, 1234u);
  const std::vector<int32_t> not_zero = {1, 2};
  const auto first = completion_runs(r, not_zero);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].index, 0);
  EXPECT_EQ(first[0].params.seed, 1234u);
}

TEST_F(ResumeTest, ErrorLineOfAnNCompletionRequestIsDroppedAndItRunsWhole) {
  const std::string error =
      R"({"id":"m","index":0,"text":"","token_ids":[],"finish_reason":"error","stop_reason":null,)"
      R"("error":{"message":"m","line":1,"field":null}})";
  write_file(error + "\n" + ok_line("a") + "\n");
  const ResumeState s = prepare_resume(path_);
  EXPECT_EQ(s.dropped_error_lines, 1);
  EXPECT_FALSE(s.done_indexes.contains("m"));
  const auto pending = pending_requests({native_request("m", 2), native_request("a", 1)}, s);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].id, "m");
  EXPECT_TRUE(written_completions(pending[0], s).empty());
  ASSERT_EQ(file_lines().size(), 1u);
}

TEST_F(ResumeTest, OpenAIRecordAnswersItsRequestWhole) {
  write_file(
      R"({"id":"batch_req_2","custom_id":"p","response":{"status_code":200,"body":{}},"error":null})"
      "\n");
  const ResumeState s = prepare_resume(path_);
  Request p = native_request("p", 3);
  p.format = RequestFormat::kOpenAIChat;
  Request q = p;
  q.id = "q";
  EXPECT_EQ(written_completions(p, s), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(written_completions(q, s).empty());
  const auto pending = pending_requests({p, q}, s);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].id, "q");
}

TEST_F(ResumeTest, ANativeLineWhoseIndexIsNotACompletionIndexIsRefused) {
  const std::string text = ok_line("a", 0) + "\n" + R"({"id":"b","index":"one","text":"x",)" +
                           R"("token_ids":[1],"finish_reason":"stop"})" + "\n";
  write_file(text);
  EXPECT_THROW(prepare_resume(path_), std::runtime_error);
  EXPECT_EQ(file_text(), text);
}

TEST_F(ResumeTest, AppendingAfterRepairKeepsTheFileValidJsonl) {
  write_file(std::string(ok_line("a")) + "\n" + std::string(ok_line("b")).substr(0, 20));
  prepare_resume(path_);
  Request r;
  r.id = "b";
  CompletionOutput out;
  out.text = "again";
  ResultWriterOptions options;
  options.run_tag = "t";
  ResultWriter::open(path_, true, options)->write(r, out);
  const auto lines = file_lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["id"], "b");
  EXPECT_EQ(prepare_resume(path_).done_ids, (std::unordered_set<std::string>{"a", "b"}));
}

TEST_F(ResumeTest, ForeignContentIsRefusedAndLeftUntouched) {
  const std::string text = std::string(ok_line("a")) + "\nnot json\n" + ok_line("b") + "\n";
  write_file(text);
  try {
    prepare_resume(path_);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_text(), text);
  write_file("{\"foo\": 1}\n");
  EXPECT_THROW(prepare_resume(path_), std::runtime_error);
}

}  // namespace
}  // namespace nanovllm
