// prompts.jsonl reading: every bad-input case names its line and field; valid lines run.
#include "engine/request_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/engine/request_test_support.h"

namespace nanovllm {
namespace {

using testing::byte_validator;
using testing::expect_error;
using testing::expect_line_error;
using testing::read;
using testing::read_one;

TEST(RequestReader, TextPromptIsTokenizedAndGetsTheRestOfTheContext) {
  const Request r = read_one(R"({"id": "a", "prompt": "hello"})");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.id, "a");
  EXPECT_EQ(r.kind, PromptKind::kText);
  EXPECT_EQ(r.prompt_token_ids, (std::vector<int32_t>{'h', 'e', 'l', 'l', 'o'}));
  EXPECT_EQ(r.sampling_params.max_tokens, 64 - 5);
}

TEST(RequestReader, IdDefaultsToTheLineNumberCountingBlankLines) {
  const auto rs = read("\n{\"prompt\": \"a\"}\n   \n\r\n{\"prompt\": \"b\"}\n");
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].id, "line-2");
  EXPECT_EQ(rs[0].line, 2);
  EXPECT_TRUE(rs[0].generated_id);
  EXPECT_EQ(rs[1].id, "line-5");
  EXPECT_EQ(rs[1].line, 5);
}

TEST(RequestReader, GeneratedIdsNeverCollideWithGivenIds) {
  // Line 1 has no id; "2" is line 3's own id and must not clash with anything generated;
  // "line-1" given on line 2 pushes line 1's generated id aside.
  const auto rs = read(
      "{\"prompt\": \"x\"}\n{\"id\": \"line-1\", \"prompt\": \"y\"}\n"
      "{\"id\": \"2\", \"prompt\": \"z\"}\n{\"prompt\": \"w\"}\n");
  ASSERT_EQ(rs.size(), 4u);
  for (const Request& r : rs) EXPECT_TRUE(r.ok()) << r.id << ": " << r.error->message;
  EXPECT_EQ(rs[0].id, "line-1.1");
  EXPECT_EQ(rs[1].id, "line-1");
  EXPECT_EQ(rs[2].id, "2");
  EXPECT_EQ(rs[3].id, "line-4");
}

TEST(RequestReader, EmptyFileGivesNoRequestsAndNoError) {
  EXPECT_TRUE(read("").empty());
  EXPECT_TRUE(read("\n\n  \n").empty());
}

TEST(RequestReader, IntegerIdBecomesItsDecimalString) {
  EXPECT_EQ(read_one(R"({"id": 42, "prompt": "x"})").id, "42");
}

TEST(RequestReader, WindowsLineEndingsAndByteOrderMarkAreAccepted) {
  const auto rs = read("\xEF\xBB\xBF{\"prompt\": \"a\"}\r\n{\"prompt\": \"b\"}\r\n");
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_TRUE(rs[0].ok());
  EXPECT_TRUE(rs[1].ok());
}

TEST(RequestReader, MalformedJsonSaysTheErrorAndColumn) {
  const std::string line = R"({"prompt": "hi",})";
  const Request r = read_one(line);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->field, "");
  const std::string column = "column " + std::to_string(line.find('}') + 1);
  EXPECT_NE(r.error->message.find("malformed JSON at " + column), std::string::npos)
      << r.error->message;
  EXPECT_NE(r.error->message.find("unexpected '}'"), std::string::npos) << r.error->message;
  EXPECT_EQ(r.id, "line-1");
}

TEST(RequestReader, NonObjectLineIsAnError) {
  expect_error("[1, 2]", "", "expected a JSON object");
}

TEST(RequestReader, UnknownFieldSuggestsTheClosestKnownOne) {
  expect_error(R"({"prompt": "x", "max_token": 5})", "max_token", "did you mean 'max_tokens'");
  expect_error(R"({"promt": "x"})", "promt", "did you mean 'prompt'");
  expect_error(R"({"prompt": "x", "colour": 5})", "colour", "known fields:");
}

TEST(RequestReader, EmptyPromptIsAnError) {
  expect_error(R"({"prompt": ""})", "prompt", "is empty");
  expect_error(R"({"prompt_token_ids": []})", "prompt_token_ids", "is empty");
  expect_error(R"({"messages": []})", "messages", "is empty");
}

TEST(RequestReader, NeedsExactlyOneOfThePromptFields) {
  expect_error(R"({"id": "x", "max_tokens": 3})", "prompt", "needs one of");
  expect_error(R"({"prompt": "a", "messages": [{"role": "user", "content": "b"}]})", "messages",
               "only one of");
  expect_error(R"({"prompt": "a", "prompt_token_ids": [1]})", "prompt_token_ids", "only one of");
}

TEST(RequestReader, TokenIdOutsideTheVocabularyNamesItsIndex) {
  expect_error(R"({"prompt_token_ids": [1, 2, 256]})", "prompt_token_ids[2]", "vocabulary");
  expect_error(R"({"prompt_token_ids": [-1]})", "prompt_token_ids[0]", "vocabulary");
  expect_error(R"({"prompt_token_ids": [1, 2.5]})", "prompt_token_ids[1]", "integer");
  const Request ok = read_one(R"({"prompt_token_ids": [0, 255]})");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.prompt_token_ids, (std::vector<int32_t>{0, 255}));
}

TEST(RequestReader, PromptMustLeaveRoomForOneTokenInTheContext) {
  const RequestValidator v = byte_validator(8);
  expect_error(R"({"prompt": "123456789"})", "prompt", "max_model_len 8", v);
  expect_error(R"({"prompt": "12345678"})", "prompt", "no room", v);
  const Request r = read_one(R"({"prompt": "1234567"})", v);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.sampling_params.max_tokens, 1);
}

TEST(RequestReader, ChatLengthIsCountedAfterRendering) {
  // "user: hi\nassistant: " is 20 bytes: fits in 21, not in 20.
  const std::string line = R"({"messages": [{"role": "user", "content": "hi"}]})";
  EXPECT_TRUE(read_one(line, byte_validator(21)).ok());
  expect_error(line, "messages", "20 tokens", byte_validator(20));
}

TEST(RequestReader, EnableThinkingReachesTheChatTemplate) {
  const Request on = read_one(R"({"messages": [{"role": "user", "content": "hi"}]})");
  const Request off =
      read_one(R"({"messages": [{"role": "user", "content": "hi"}], "enable_thinking": false})");
  ASSERT_TRUE(on.ok());
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(on.enable_thinking);
  EXPECT_FALSE(off.enable_thinking);
  EXPECT_EQ(off.prompt_token_ids.size(), on.prompt_token_ids.size() + 15);  // "<think></think>"
  expect_error(R"({"prompt": "x", "enable_thinking": true})", "enable_thinking", "chat");
  expect_error(R"({"messages": [{"role": "user", "content": "x"}], "enable_thinking": 1})",
               "enable_thinking", "true or false");
}

TEST(RequestReader, MessagesAreCheckedPerEntry) {
  expect_error(R"({"messages": [{"role": "robot", "content": "x"}]})", "messages[0].role",
               "must be");
  expect_error(R"({"messages": [{"role": "user"}]})", "messages[0].content", "missing");
  expect_error(
      R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "tool_calls": []}]})",
      "messages[1].tool_calls", "not supported");
  expect_error(R"({"messages": [{"role": "user", "contnet": "a"}]})", "messages[0].contnet",
               "did you mean 'content'");
}

TEST(RequestReader, TextPartsOfAMessageAreJoinedWithNewlines) {
  const Request r = read_one(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
  expect_error(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
               "messages[0].content[0]", "text");
}

TEST(RequestReader, MaxTokensMustBeAPositiveIntegerThatFits) {
  expect_error(R"({"prompt": "x", "max_tokens": 0})", "max_tokens", "at least 1");
  expect_error(R"({"prompt": "x", "max_tokens": -3})", "max_tokens", "at least 1");
  expect_error(R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens", "integer");
  expect_error(R"({"prompt": "x", "max_tokens": 64})", "max_tokens", "exceeds max_model_len");
  const Request r = read_one(R"({"prompt": "x", "max_tokens": 63})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.sampling_params.max_tokens, 63);
}

TEST(RequestReader, TemperatureMustBeFiniteAndNotNegative) {
  expect_error(R"({"prompt": "x", "temperature": -0.5})", "temperature", "finite");
  expect_error(R"({"prompt": "x", "temperature": 1e300})", "temperature", "finite");
  expect_error(R"({"prompt": "x", "temperature": "hot"})", "temperature", "number");
  const Request greedy = read_one(R"({"prompt": "x", "temperature": 0})");
  ASSERT_TRUE(greedy.ok());
  EXPECT_TRUE(greedy.sampling_params.greedy());
}

TEST(RequestReader, TopPMustBeInZeroExclusiveToOne) {
  expect_error(R"({"prompt": "x", "top_p": 0})", "top_p", "(0, 1]");
  expect_error(R"({"prompt": "x", "top_p": 1.01})", "top_p", "(0, 1]");
  EXPECT_TRUE(read_one(R"({"prompt": "x", "top_p": 1})").ok());
  EXPECT_TRUE(read_one(R"({"prompt": "x", "top_p": 0.01})").ok());
}

TEST(RequestReader, TopKBelowMinusOneIsAnErrorAndZeroOrMinusOneDisable) {
  expect_error(R"({"prompt": "x", "top_k": -2})", "top_k", "disabled");
  EXPECT_EQ(read_one(R"({"prompt": "x", "top_k": -1})").sampling_params.top_k, -1);
  EXPECT_EQ(read_one(R"({"prompt": "x", "top_k": 0})").sampling_params.top_k, 0);
  EXPECT_EQ(read_one(R"({"prompt": "x", "top_k": 40})").sampling_params.top_k, 40);
}

TEST(RequestReader, MinPMustBeInZeroToOne) {
  expect_error(R"({"prompt": "x", "min_p": -0.1})", "min_p", "[0, 1]");
  expect_error(R"({"prompt": "x", "min_p": 1.5})", "min_p", "[0, 1]");
  EXPECT_TRUE(read_one(R"({"prompt": "x", "min_p": 0})").ok());
  EXPECT_TRUE(read_one(R"({"prompt": "x", "min_p": 1})").ok());
}

TEST(RequestReader, SeedAndIgnoreEosAreTypeChecked) {
  expect_error(R"({"prompt": "x", "seed": "7"})", "seed", "integer");
  expect_error(R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos", "true or false");
  const Request r = read_one(R"({"prompt": "x", "seed": -2, "ignore_eos": true})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.sampling_params.seed, std::numeric_limits<uint64_t>::max() - 1);  // the bits
  EXPECT_TRUE(r.sampling_params.ignore_eos);
}

TEST(RequestReader, SeedMinusOneMeansNoSeedAsInVllm) {
  const Request r = read_one(R"({"prompt": "x", "seed": -1})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.sampling_params.seed.has_value());  // derived later, as without a seed
  EXPECT_EQ(read_one(R"({"prompt": "x", "seed": 0})").sampling_params.seed, 0u);
}

TEST(RequestReader, TemperatureBelowTheMinimumIsRaisedToItAndMarked) {
  for (const char* t : {"1e-45", "1e-38", "0.0099"}) {
    const Request r = read_one(std::string(R"({"prompt": "x", "temperature": )") + t + "}");
    ASSERT_TRUE(r.ok()) << t;
    EXPECT_FLOAT_EQ(r.sampling_params.temperature, 0.01f) << t;
    EXPECT_TRUE(r.temperature_raised) << t;
  }
  const Request at_min = read_one(R"({"prompt": "x", "temperature": 0.01})");
  EXPECT_FLOAT_EQ(at_min.sampling_params.temperature, 0.01f);
  EXPECT_FALSE(at_min.temperature_raised);
  const Request greedy = read_one(R"({"prompt": "x", "temperature": 0})");
  EXPECT_EQ(greedy.sampling_params.temperature, 0.0f);
  EXPECT_FALSE(greedy.temperature_raised);
}

TEST(RequestReader, InvalidUtf8NamesTheFieldHoldingIt) {
  expect_error("{\"prompt\": \"ab\xff\"}", "prompt", "invalid UTF-8 at column 15");
  expect_error(
      "{\"messages\": [{\"role\": \"user\", \"content\": \"ok\"}, {\"role\": \"user\", "
      "\"content\": \"\xc3\x28\"}]}",
      "messages[1].content", "invalid UTF-8");
  // An encoded surrogate half is not UTF-8 either.
  expect_error("{\"id\": \"\xed\xa0\x80\", \"prompt\": \"x\"}", "id", "invalid UTF-8");
}

TEST(RequestReader, DuplicateIdFailsTheLaterLine) {
  const auto rs = read("{\"id\": \"a\", \"prompt\": \"x\"}\n{\"id\": \"a\", \"prompt\": \"y\"}\n");
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_TRUE(rs[0].ok());
  ASSERT_NO_FATAL_FAILURE(expect_line_error(rs[1], 2, "id"));
  EXPECT_NE(rs[1].error->message.find("duplicate id 'a'"), std::string::npos);
  // A given id that looks like a line number is only a given id: no line's default.
  const auto rs2 = read("{\"prompt\": \"x\"}\n{\"id\": \"1\", \"prompt\": \"y\"}\n");
  EXPECT_TRUE(rs2[0].ok());
  EXPECT_TRUE(rs2[1].ok());
}

TEST(RequestReader, ValidLinesStillRunBesideBadOnes) {
  const auto rs = read(
      "{\"prompt\": \"a\"}\n{\"prompt\": \"\"}\nnot json\n{\"prompt\": \"b\", \"top_p\": 2}\n"
      "{\"prompt_token_ids\": [5]}\n");
  ASSERT_EQ(rs.size(), 5u);
  EXPECT_EQ(count_failed(rs), 3);
  EXPECT_TRUE(rs[0].ok());
  EXPECT_TRUE(rs[4].ok());
  EXPECT_EQ(rs[3].error->line, 4);
}

TEST(RequestReader, TokenizerFailureBecomesTheLinesError) {
  RequestValidator v = byte_validator();
  v.encode = [](std::string_view) -> std::vector<int32_t> { throw std::runtime_error("boom"); };
  expect_error(R"({"prompt": "x"})", "prompt", "boom", v);
}

TEST(RequestReader, MissingFileIsAClearError) {
  try {
    read_requests_file("/nonexistent/prompts.jsonl", byte_validator(), {});
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    // What failed, which file, and why.
    EXPECT_NE(
        std::string(e.what()).find(
            "cannot open the prompts file /nonexistent/prompts.jsonl: No such file or directory"),
        std::string::npos)
        << e.what();
  }
}

TEST(RequestReader, BundledExamplePromptsAllValidate) {
  // The example file in the repository must stay valid (the test runs from the source root).
  RequestValidator v = byte_validator(4096);
  v.vocab_size = 151936;  // Qwen3's: the example has a token-id prompt
  const auto rs = read_requests_file("examples/prompts.jsonl", v, {});
  EXPECT_GE(rs.size(), 12u);
  for (const Request& r : rs) EXPECT_TRUE(r.ok()) << r.line << ": " << r.error->message;
  // The request-field examples (stop strings, stop ids, min_tokens, n) too.
  const auto fields = read_requests_file("examples/request_fields.jsonl", v, {});
  EXPECT_GE(fields.size(), 8u);
  int with_n = 0, with_stop = 0;
  for (const Request& r : fields) {
    EXPECT_TRUE(r.ok()) << r.line << ": " << r.error->message;
    with_n += r.sampling_params.n > 1;
    with_stop += !r.sampling_params.stop.empty();
  }
  EXPECT_EQ(with_n, 2);
  EXPECT_EQ(with_stop, 4);
  // The penalty, logit_bias and logprobs examples.
  const auto asks = [](const Request& r) {
    const SamplingParams& p = r.sampling_params;
    return p.logprobs || p.prompt_logprobs || p.penalized() || !p.logit_bias.empty();
  };
  EXPECT_EQ(std::ranges::count_if(fields, asks), 2);
}

}  // namespace
}  // namespace nanovllm
