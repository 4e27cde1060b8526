// prompts.jsonl reading: every bad-input case names its line and field; valid lines run.
#include "engine/request_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

namespace nanovllm {
namespace {

// Obvious stand-ins for the tokenizer: one token per byte, and a chat "template" that
// writes "role: content\n" per message, then the generation prompt.
RequestValidator byte_validator(int32_t max_model_len = 64) {
  RequestValidator v;
  v.vocab_size = 256;
  v.max_model_len = max_model_len;
  v.encode = [](std::string_view text) {
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  };
  v.render_chat = [](const nlohmann::json& messages, bool enable_thinking) {
    std::string out;
    for (const auto& m : messages)
      out += m["role"].get<std::string>() + ": " + m["content"].get<std::string>() + "\n";
    out += "assistant: ";
    if (!enable_thinking) out += "<think></think>";
    return out;
  };
  return v;
}

std::vector<Request> read(const std::string& text, const RequestValidator& v = byte_validator(),
                          const SamplingLevels& levels = {}) {
  std::istringstream in(text);
  return read_requests(in, v, levels);
}

Request read_one(const std::string& line, const RequestValidator& v = byte_validator()) {
  auto requests = read(line + "\n", v);
  EXPECT_EQ(requests.size(), 1u);
  return requests.at(0);
}

// The error of a single-line file must name line 1 and `field`, and mention `words`.
void expect_error(const std::string& line, const std::string& field, const std::string& words,
                  const RequestValidator& v = byte_validator()) {
  SCOPED_TRACE(line);
  const Request r = read_one(line, v);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error->line, 1);
  EXPECT_EQ(r.error->field, field);
  EXPECT_NE(r.error->message.find(words), std::string::npos) << r.error->message;
}

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

TEST(RequestReader, RequestOnlySamplingFieldsReachTheResolvedParams) {
  const Request r = read_one(
      R"({"prompt": "x", "max_tokens": 20, "stop": ["\n", "END"], "stop_token_ids": [0, 7, 255], "include_stop_str_in_output": true, "min_tokens": 20, "skip_special_tokens": false, "spaces_between_special_tokens": false, "n": 64})");
  ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
  const SamplingParams& p = r.sampling_params;
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{0, 7, 255}));
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_EQ(p.min_tokens, 20);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_FALSE(p.spaces_between_special_tokens);
  EXPECT_EQ(p.n, 64);
  EXPECT_EQ(p.max_tokens, 20);
}

TEST(RequestReader, RequestOnlySamplingFieldsDefaultLikeVllmWhenAbsentOrNull) {
  for (
      const std::string line :
      {R"({"prompt": "x"})",
       R"({"prompt": "x", "stop": null, "stop_token_ids": null, "include_stop_str_in_output": null, "min_tokens": null, "skip_special_tokens": null, "spaces_between_special_tokens": null, "n": null})",
       R"({"prompt": "x", "stop": [], "stop_token_ids": []})"}) {
    SCOPED_TRACE(line);
    const Request r = read_one(line);
    ASSERT_TRUE(r.ok()) << r.error->message;
    const SamplingParams& p = r.sampling_params;
    EXPECT_TRUE(p.stop.empty());
    EXPECT_TRUE(p.stop_token_ids.empty());
    EXPECT_FALSE(p.include_stop_str_in_output);
    EXPECT_EQ(p.min_tokens, 0);
    EXPECT_TRUE(p.skip_special_tokens);
    EXPECT_TRUE(p.spaces_between_special_tokens);
    EXPECT_EQ(p.n, 1);
  }
}

TEST(RequestReader, StopAsASingleStringBecomesAOneElementList) {
  const Request r = read_one(R"({"prompt": "x", "stop": "###"})");
  ASSERT_TRUE(r.ok()) << r.error->message;
  EXPECT_EQ(r.sampling_params.stop, (std::vector<std::string>{"###"}));
}

TEST(RequestReader, StopStringsMustBeNonEmptyStringsAndAtMost32) {
  expect_error(R"({"prompt": "x", "stop": ""})", "stop", "is empty");
  expect_error(R"({"prompt": "x", "stop": ["a", ""]})", "stop[1]", "is empty");
  expect_error(R"({"prompt": "x", "stop": ["a", "b", 3]})", "stop[2]", "must be a string");
  expect_error(R"({"prompt": "x", "stop": 3})", "stop", "a string or an array of strings");
  auto stops = [](int count) {
    nlohmann::json line = {{"prompt", "x"}, {"stop", nlohmann::json::array()}};
    for (int i = 0; i < count; ++i)
      line["stop"].push_back(std::string("s").append(std::to_string(i)));
    return line.dump();
  };
  expect_error(stops(33), "stop", "at most 32");
  const Request ok = read_one(stops(32));
  ASSERT_TRUE(ok.ok()) << ok.error->message;
  EXPECT_EQ(ok.sampling_params.stop.size(), 32u);
}

TEST(RequestReader, StopTokenIdsMustBeInTheVocabularyAndAtMost32) {
  expect_error(R"({"prompt": "x", "stop_token_ids": [1, 256]})", "stop_token_ids[1]",
               "outside the vocabulary [0, 256)");
  expect_error(R"({"prompt": "x", "stop_token_ids": [-1]})", "stop_token_ids[0]",
               "outside the vocabulary");
  expect_error(R"({"prompt": "x", "stop_token_ids": [1, 2, 2.5]})", "stop_token_ids[2]",
               "integer token id");
  expect_error(R"({"prompt": "x", "stop_token_ids": 5})", "stop_token_ids", "array");
  nlohmann::json line = {{"prompt", "x"}, {"stop_token_ids", nlohmann::json::array()}};
  for (int i = 0; i < 32; ++i) line["stop_token_ids"].push_back(i);
  EXPECT_TRUE(read_one(line.dump()).ok());
  line["stop_token_ids"].push_back(32);
  expect_error(line.dump(), "stop_token_ids", "at most 32");
}

TEST(RequestReader, PenaltiesLogitBiasAndLogprobsReachTheResolvedParams) {
  const Request r = read_one(
      R"({"prompt": "x", "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.2, "logit_bias": {"255": -100, "32": 3}, "logprobs": 5, "prompt_logprobs": 2})");
  ASSERT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
  const SamplingParams& p = r.sampling_params;
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.25f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.2f);
  EXPECT_EQ(p.logit_bias, (std::vector<std::pair<int32_t, float>>{{32, 3.0f}, {255, -100.0f}}));
  EXPECT_EQ(p.logprobs, 5);
  EXPECT_EQ(p.prompt_logprobs, 2);
  EXPECT_TRUE(p.penalized());
}

TEST(RequestReader, WithoutTheNewFieldsNothingIsPenalizedBiasedOrLogged) {
  const Request r = read_one(R"({"prompt": "x", "repetition_penalty": null, "logprobs": null})");
  ASSERT_TRUE(r.ok()) << r.error->message;
  const SamplingParams& p = r.sampling_params;
  EXPECT_FALSE(p.penalized());
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_FALSE(p.logprobs.has_value());
  EXPECT_FALSE(p.prompt_logprobs.has_value());
}

TEST(RequestReader, LogprobsAbove20IsAnErrorNamingLineFieldAndRange) {
  expect_error(R"({"prompt": "x", "logprobs": 25})", "logprobs", "must be in [0, 20], got 25");
  expect_error(R"({"prompt": "x", "prompt_logprobs": 21})", "prompt_logprobs",
               "must be in [0, 20], got 21");
}

TEST(RequestReader, PenaltiesOutsideTheirRangesAreErrors) {
  expect_error(R"({"prompt": "x", "presence_penalty": -2.01})", "presence_penalty",
               "must be in [-2, 2]");
  expect_error(R"({"prompt": "x", "frequency_penalty": 9})", "frequency_penalty",
               "must be in [-2, 2], got 9");
  expect_error(R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty",
               "must be a finite number > 0 (1 = off), got 0");
  expect_error(R"({"prompt": "x", "repetition_penalty": -1.5})", "repetition_penalty", "got -1.5");
  expect_error(R"({"prompt": "x", "repetition_penalty": true})", "repetition_penalty",
               "must be a number");
}

TEST(RequestReader, LogitBiasIdOutsideTheVocabularyIsFoundAtValidation) {
  // Parsing alone cannot know the vocabulary: only a non-negative int32 is required there.
  EXPECT_TRUE(parse_request_line(R"({"prompt": "x", "logit_bias": {"300": 1}})", 1).ok());
  expect_error(R"({"prompt": "x", "logit_bias": {"7": 1, "300": 1}})", "logit_bias.300",
               "token id 300 is outside the vocabulary [0, 256)");
  expect_error(R"({"prompt": "x", "logit_bias": {"x7": 1}})", "logit_bias.x7", "decimal integer");
}

TEST(RequestReader, NumberTooLargeForADoubleFailsItsLineOnly) {
  const auto rs = read("{\"prompt\": \"x\", \"presence_penalty\": 1e999}\n{\"prompt\": \"y\"}\n");
  ASSERT_EQ(rs.size(), 2u);
  ASSERT_FALSE(rs[0].ok());
  EXPECT_EQ(rs[0].error->line, 1);
  EXPECT_NE(rs[0].error->message.find("number overflow"), std::string::npos)
      << rs[0].error->message;
  EXPECT_TRUE(rs[1].ok());
}

TEST(RequestReader, BadLogprobsLineFailsAloneBesideGoodOnes) {
  const auto rs = read(
      "{\"prompt\": \"a\", \"logprobs\": 2}\n{\"prompt\": \"b\", \"logprobs\": 25}\n"
      "{\"prompt\": \"c\", \"logit_bias\": {\"1\": 5}}\n");
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_TRUE(rs[0].ok());
  ASSERT_FALSE(rs[1].ok());
  EXPECT_EQ(rs[1].error->line, 2);
  EXPECT_EQ(rs[1].error->field, "logprobs");
  EXPECT_TRUE(rs[2].ok());
}

TEST(RequestReader, MinTokensMustBeNonNegativeAndAtMostMaxTokens) {
  expect_error(R"({"prompt": "x", "min_tokens": -1})", "min_tokens", ">= 0");
  expect_error(R"({"prompt": "x", "min_tokens": 1.5})", "min_tokens", "integer");
  expect_error(R"({"prompt": "x", "max_tokens": 5, "min_tokens": 6})", "min_tokens",
               "min_tokens must be less than or equal to max_tokens=5, got 6");
  // Without max_tokens the bound is the resolved default: the 63 tokens left of 64.
  expect_error(R"({"prompt": "x", "min_tokens": 64})", "min_tokens",
               "less than or equal to max_tokens=63");
  EXPECT_TRUE(read_one(R"({"prompt": "x", "max_tokens": 5, "min_tokens": 5})").ok());
  EXPECT_EQ(read_one(R"({"prompt": "x", "min_tokens": 63})").sampling_params.min_tokens, 63);
}

TEST(RequestReader, NMustBeAnIntegerFromOneTo64) {
  expect_error(R"({"prompt": "x", "n": 0})", "n", "in [1, 64], got 0");
  expect_error(R"({"prompt": "x", "n": 65})", "n", "in [1, 64], got 65");
  expect_error(R"({"prompt": "x", "n": 2.0})", "n", "integer");
  EXPECT_EQ(read_one(R"({"prompt": "x", "n": 3})").sampling_params.n, 3);
}

TEST(RequestReader, DetokenizationAndStopFlagsMustBeBooleans) {
  expect_error(R"({"prompt": "x", "include_stop_str_in_output": 1})", "include_stop_str_in_output",
               "true or false");
  expect_error(R"({"prompt": "x", "skip_special_tokens": "no"})", "skip_special_tokens",
               "true or false");
  expect_error(R"({"prompt": "x", "spaces_between_special_tokens": 0})",
               "spaces_between_special_tokens", "true or false");
}

TEST(RequestReader, UnsupportedVllmFieldsAreRefusedByNameWithTheirReason) {
  expect_error(R"({"prompt": "x", "guided_json": {"type": "object"}})", "guided_json",
               "structured output (guided decoding) is not supported");
  expect_error(R"({"prompt": "x", "structured_outputs": {"regex": "a+"}})", "structured_outputs",
               "structured output (guided decoding) is not supported");
  expect_error(R"({"prompt": "x", "response_format": {"type": "json_object"}})", "response_format",
               "structured output (response_format type \"json_object\")");
  expect_error(R"({"prompt": "x", "bad_words": ["foo"]})", "bad_words",
               "bad_words is not supported");
  expect_error(R"({"prompt": "x", "allowed_token_ids": [1, 2]})", "allowed_token_ids",
               "allowed_token_ids is not supported");
  expect_error(R"({"prompt": "x", "best_of": 2})", "best_of",
               "best_of is not supported; use n for several completions");
}

TEST(RequestReader, RefusedFieldsThatAskForNothingAreAccepted) {
  const Request r = read_one(
      R"({"prompt": "x", "response_format": {"type": "text"}, "best_of": 1, "bad_words": [], "guided_json": null, "allowed_token_ids": null})");
  EXPECT_TRUE(r.ok()) << r.error->message << " at " << r.error->field;
}

TEST(RequestReader, RefusedFieldNamesAreNotSuggestedForTypos) {
  // "n" and "stop" are known; a refused name never appears in the known-field list.
  const Request r = read_one(R"({"prompt": "x", "colour": 5})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error->message.find(" stop_token_ids"), std::string::npos) << r.error->message;
  EXPECT_EQ(r.error->message.find("guided_json"), std::string::npos) << r.error->message;
  expect_error(R"({"prompt": "x", "min_token": 1})", "min_token", "did you mean 'min_tokens'");
}

TEST(RequestReader, RequestOnlyFieldErrorsNameTheirOwnLine) {
  const auto rs = read(
      "{\"prompt\": \"a\", \"stop\": \"x\"}\n\n{\"prompt\": \"b\", \"stop\": [\"ok\", \"\"]}\n"
      "{\"prompt\": \"c\", \"stop_token_ids\": [300]}\n");
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_TRUE(rs[0].ok());
  ASSERT_FALSE(rs[1].ok());
  EXPECT_EQ(rs[1].error->line, 3);
  EXPECT_EQ(rs[1].error->field, "stop[1]");
  ASSERT_FALSE(rs[2].ok());
  EXPECT_EQ(rs[2].error->line, 4);
  EXPECT_EQ(rs[2].error->field, "stop_token_ids[0]");
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
  ASSERT_FALSE(rs[1].ok());
  EXPECT_EQ(rs[1].error->line, 2);
  EXPECT_EQ(rs[1].error->field, "id");
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
