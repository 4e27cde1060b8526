// --shard K/N on the request reader: request i (non-blank lines from 0) belongs to shard
// i mod N; the N shards together hold every request once, each with the id it has in the
// whole file, and ids are still checked for uniqueness across the whole file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/request_reader.h"
#include "tests/engine/request_test_support.h"

namespace nanovllm {
namespace {

using testing::byte_validator;

// Seven requests over nine lines (a blank line and a whitespace line between them); line 8
// repeats line 1's id.
const char* kFile =
    "{\"id\": \"a\", \"prompt\": \"x\"}\n"
    "{\"prompt\": \"y\"}\n"
    "\n"
    "{\"id\": \"c\", \"prompt\": \"z\"}\n"
    "{\"id\": \"d\", \"prompt\": \"\"}\n"
    "   \n"
    "{\"id\": \"e\", \"prompt\": \"w\"}\n"
    "{\"id\": \"a\", \"prompt\": \"v\"}\n"
    "{\"prompt\": \"u\"}\n";

std::vector<Request> read_shard(int index, int count) {
  std::istringstream in(kFile);
  return read_requests(in, byte_validator(), {}, RequestShard{index, count});
}

std::vector<std::string> ids(const std::vector<Request>& rs) {
  std::vector<std::string> out;
  for (const Request& r : rs) out.push_back(r.id);
  return out;
}

TEST(RequestShard, RequestIndexModNPicksTheShardCountingNonBlankLinesOnly) {
  // Requests in order: a(0) line-2(1) c(2) d(3) e(4) a-duplicate(5) line-9(6).
  EXPECT_EQ(ids(read_shard(0, 3)), (std::vector<std::string>{"a", "d", "line-9"}));
  EXPECT_EQ(ids(read_shard(1, 3)), (std::vector<std::string>{"line-2", "e"}));
  EXPECT_EQ(ids(read_shard(2, 3)), (std::vector<std::string>{"c", "a"}));
}

TEST(RequestShard, ShardsTogetherHoldEveryRequestOnceWithTheWholeFilesIdsAndLines) {
  std::istringstream whole_in(kFile);
  const std::vector<Request> whole = read_requests(whole_in, byte_validator(), {});
  for (int n : {1, 2, 3, 7, 10}) {
    std::multiset<std::pair<int64_t, std::string>> seen;
    for (int k = 0; k < n; ++k)
      for (const Request& r : read_shard(k, n)) seen.insert({r.line, r.id});
    std::multiset<std::pair<int64_t, std::string>> expected;
    for (const Request& r : whole) expected.insert({r.line, r.id});
    EXPECT_EQ(seen, expected) << "N = " << n;
  }
}

TEST(RequestShard, DuplicateIdIsCaughtEvenWhenTheFirstUseIsInAnotherShard) {
  // Line 8 ("a" again) is request 5, in shard 2 of 3; line 1's "a" is in shard 0.
  const std::vector<Request> shard2 = read_shard(2, 3);
  ASSERT_EQ(shard2.size(), 2u);
  EXPECT_TRUE(shard2[0].ok());
  ASSERT_FALSE(shard2[1].ok());
  EXPECT_EQ(shard2[1].line, 8);
  EXPECT_NE(shard2[1].error->message.find("duplicate id 'a'"), std::string::npos);
}

TEST(RequestShard, BadLinesStayInTheirShardAsErrors) {
  const std::vector<Request> shard0 = read_shard(0, 3);  // d (empty prompt) is request 3
  ASSERT_EQ(shard0.size(), 3u);
  EXPECT_FALSE(shard0[1].ok());
  EXPECT_EQ(shard0[1].id, "d");
}

TEST(RequestShard, HasRequestLinesAsksOnlyTheShard) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("request_shard_test_" + std::to_string(::getpid()));
  {
    std::ofstream out(p);
    out << "{\"prompt\": \"x\"}\n\n{\"prompt\": \"y\"}\n";  // two requests
  }
  EXPECT_TRUE(has_request_lines(p, {0, 3}));
  EXPECT_TRUE(has_request_lines(p, {1, 3}));
  EXPECT_FALSE(has_request_lines(p, {2, 3}));  // a shard past the last request is empty
  EXPECT_TRUE(has_request_lines(p));
  std::filesystem::remove(p);
}

}  // namespace
}  // namespace nanovllm
