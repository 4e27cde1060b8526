// Result lines: valid JSON, the right fields, one flushed line per native completion / per
// OpenAI request, both shapes; n > 1 completions, stop_reason.
#include "engine/result_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace nanovllm {
namespace {

ResultWriterOptions fixed_options() {
  ResultWriterOptions o;
  o.served_model = "Qwen3-0.6B";
  o.run_tag = "run";
  o.unix_time = [] { return int64_t{1700000000}; };
  return o;
}

Request text_request(const std::string& id) {
  Request r;
  r.id = id;
  r.line = 3;
  r.kind = PromptKind::kText;
  r.prompt = "hi";
  r.prompt_token_ids = {1, 2, 3};
  return r;
}

CompletionOutput output(const std::string& text, FinishReason reason = FinishReason::kStop) {
  CompletionOutput out;
  out.text = text;
  out.token_ids = {7, 8};
  out.finish_reason = reason;
  out.prompt_tokens = 3;
  out.cached_tokens = 1;
  return out;
}

std::vector<nlohmann::json> parse_lines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(ResultWriter, UnopenableOutputFileSaysWhichAndWhy) {
  try {
    ResultWriter::open("/nonexistent-dir/out.jsonl", false, fixed_options());
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "cannot open the output file /nonexistent-dir/out.jsonl: No such file or directory"),
        std::string::npos)
        << e.what();
  }
}

TEST(ResultWriter, NativeResultHasEveryField) {
  std::ostringstream out;
  ResultWriter writer(out, fixed_options());
  writer.write(text_request("a"), output("hello", FinishReason::kLength));
  ASSERT_EQ(out.str().back(), '\n');
  const auto lines = parse_lines(out.str());
  ASSERT_EQ(lines.size(), 1u);
  const auto& j = lines[0];
  EXPECT_EQ(j["id"], "a");
  EXPECT_EQ(j["index"], 0);
  EXPECT_EQ(j["text"], "hello");
  EXPECT_EQ(j["token_ids"], nlohmann::json({7, 8}));
  EXPECT_EQ(j["finish_reason"], "length");
  ASSERT_TRUE(j.contains("stop_reason"));
  EXPECT_TRUE(j["stop_reason"].is_null());
  EXPECT_EQ(j["prompt_tokens"], 3);
  EXPECT_EQ(j["completion_tokens"], 2);
  EXPECT_EQ(j["cached_tokens"], 1);
  EXPECT_FALSE(j.contains("reasoning_content"));
  EXPECT_FALSE(j.contains("error"));
  EXPECT_EQ(writer.num_ok(), 1);
}

TEST(ResultWriter, ChatResultSplitsReasoningFromText) {
  Request r = text_request("c");
  r.kind = PromptKind::kChat;
  r.messages = nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}});
  const auto j = result_json(r, output("<think>hmm</think>yes"), fixed_options(), 0);
  EXPECT_EQ(j["reasoning_content"], "hmm");
  EXPECT_EQ(j["text"], "yes");
  // Cut off while thinking: everything is reasoning and the answer is null.
  const auto cut = result_json(r, output("<think>hm", FinishReason::kLength), fixed_options(), 0);
  EXPECT_EQ(cut["reasoning_content"], "hm");
  EXPECT_TRUE(cut["text"].is_null());
  r.enable_thinking = false;
  const auto off = result_json(r, output("plain"), fixed_options(), 0);
  EXPECT_TRUE(off["reasoning_content"].is_null());
  EXPECT_EQ(off["text"], "plain");
}

TEST(ResultWriter, ErrorResultNamesMessageLineAndField) {
  Request r = text_request("bad");
  r.fail("must be in (0, 1]", "top_p");
  std::ostringstream out;
  ResultWriter writer(out, fixed_options());
  writer.write_error(r);
  const auto j = parse_lines(out.str()).at(0);
  EXPECT_EQ(j["id"], "bad");
  EXPECT_EQ(j["finish_reason"], "error");
  EXPECT_EQ(j["token_ids"], nlohmann::json::array());
  EXPECT_EQ(j["error"]["message"], "must be in (0, 1]");
  EXPECT_EQ(j["error"]["line"], 3);
  EXPECT_EQ(j["error"]["field"], "top_p");
  // The keys of a result line, so every native line has one shape.
  EXPECT_EQ(j["index"], 0);
  ASSERT_TRUE(j.contains("stop_reason"));
  EXPECT_TRUE(j["stop_reason"].is_null());
  EXPECT_EQ(writer.num_failed(), 1);
  Request whole_line = text_request("x");
  whole_line.fail("malformed JSON at column 2: oops", "");
  EXPECT_TRUE(error_json(whole_line, fixed_options(), 0)["error"]["field"].is_null());
}

TEST(ResultWriter, OpenAIChatAnswerHasTheBatchOutputShape) {
  Request r = text_request("req-1");
  r.format = RequestFormat::kOpenAIChat;
  r.kind = PromptKind::kChat;
  r.model = "my-model";
  const auto j = result_json(r, output("<think>a</think>b"), fixed_options(), 4);
  EXPECT_EQ(j["custom_id"], "req-1");
  EXPECT_EQ(j["id"].get<std::string>().rfind("batch_req_", 0), 0u);
  EXPECT_TRUE(j["error"].is_null());
  const auto& response = j["response"];
  EXPECT_EQ(response["status_code"], 200);
  EXPECT_TRUE(response["request_id"].is_string());
  const auto& body = response["body"];
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["created"], 1700000000);
  EXPECT_EQ(body["model"], "my-model");
  const auto& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["finish_reason"], "stop");
  ASSERT_TRUE(choice.contains("stop_reason"));
  EXPECT_TRUE(choice["stop_reason"].is_null());
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], "b");
  EXPECT_EQ(choice["message"]["reasoning_content"], "a");
  EXPECT_EQ(body["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(body["usage"]["completion_tokens"], 2);
  EXPECT_EQ(body["usage"]["total_tokens"], 5);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
}

TEST(ResultWriter, OpenAICompletionAnswerIsATextCompletion) {
  Request r = text_request("c-1");
  r.format = RequestFormat::kOpenAICompletion;
  const auto j = result_json(r, output("<think>kept</think>"), fixed_options(), 0);
  const auto& body = j["response"]["body"];
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "Qwen3-0.6B");  // the served model when the request named none
  EXPECT_EQ(body["choices"][0]["text"], "<think>kept</think>");  // no reasoning split
  EXPECT_FALSE(body["choices"][0].contains("message"));
}

TEST(ResultWriter, NativeStopReasonIsNullTheStopStringOrTheStopTokenId) {
  const Request r = text_request("s");
  CompletionOutput by_string = output("cut");
  by_string.stop_string = "END";
  CompletionOutput by_token = output("cut");
  by_token.stop_token_id = 151645;
  const auto eos = result_json(r, output("x"), fixed_options(), 0);
  const auto str = result_json(r, by_string, fixed_options(), 0);
  const auto tok = result_json(r, by_token, fixed_options(), 0);
  EXPECT_TRUE(eos["stop_reason"].is_null());
  EXPECT_EQ(str["stop_reason"], "END");
  ASSERT_TRUE(tok["stop_reason"].is_number_integer());  // vLLM: the id itself, not a string
  EXPECT_EQ(tok["stop_reason"], 151645);
}

TEST(ResultWriter, NativeRequestWithNCompletionsWritesOneLinePerCompletion) {
  std::ostringstream out;
  ResultWriter writer(out, fixed_options());
  CompletionOutput second = output("two", FinishReason::kLength);
  second.index = 2;
  second.token_ids = {9, 9, 9};
  CompletionOutput first = output("zero");
  first.stop_token_id = 5;
  const std::vector<CompletionOutput> done = {second, first};  // as they finished
  writer.write(text_request("m"), done);
  const auto lines = parse_lines(out.str());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["id"], "m");
  EXPECT_EQ(lines[0]["index"], 2);
  EXPECT_EQ(lines[0]["text"], "two");
  EXPECT_EQ(lines[0]["finish_reason"], "length");
  EXPECT_TRUE(lines[0]["stop_reason"].is_null());
  EXPECT_EQ(lines[0]["completion_tokens"], 3);
  EXPECT_EQ(lines[1]["id"], "m");
  EXPECT_EQ(lines[1]["index"], 0);
  EXPECT_EQ(lines[1]["stop_reason"], 5);
  for (const auto& line : lines) EXPECT_EQ(line["prompt_tokens"], 3);  // on every line
  EXPECT_EQ(writer.num_ok(), 2);
}

// Three completions of one request, given in the order they finished (2, 0, 1).
std::vector<CompletionOutput> three_completions() {
  CompletionOutput c0 = output("<think>r0</think>a0");
  c0.index = 0;
  c0.cached_tokens = 2;
  c0.stop_string = "STOP";
  CompletionOutput c1 = output("<think>r1</think>a1", FinishReason::kLength);
  c1.index = 1;
  c1.token_ids = {1, 2, 3, 4};
  c1.cached_tokens = 0;
  CompletionOutput c2 = output("<think>r2", FinishReason::kStop);
  c2.index = 2;
  c2.token_ids = {5};
  c2.cached_tokens = 0;
  c2.stop_token_id = 42;
  return {c2, c0, c1};
}

TEST(ResultWriter, OpenAIChatWithThreeCompletionsHasOrderedChoicesAndSummedUsage) {
  Request r = text_request("chat-n3");
  r.format = RequestFormat::kOpenAIChat;
  r.kind = PromptKind::kChat;
  const auto completions = three_completions();
  const auto j = result_json(r, completions, fixed_options(), 0);
  EXPECT_EQ(j["custom_id"], "chat-n3");
  const auto& body = j["response"]["body"];
  EXPECT_EQ(body["object"], "chat.completion");
  const auto& choices = body["choices"];
  ASSERT_EQ(choices.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(choices[i]["index"], i);
  EXPECT_EQ(choices[0]["finish_reason"], "stop");
  EXPECT_EQ(choices[0]["stop_reason"], "STOP");
  EXPECT_EQ(choices[0]["message"]["content"], "a0");
  EXPECT_EQ(choices[0]["message"]["reasoning_content"], "r0");
  EXPECT_EQ(choices[1]["finish_reason"], "length");
  EXPECT_TRUE(choices[1]["stop_reason"].is_null());
  EXPECT_EQ(choices[1]["message"]["content"], "a1");
  EXPECT_EQ(choices[2]["finish_reason"], "stop");
  EXPECT_EQ(choices[2]["stop_reason"], 42);
  EXPECT_TRUE(choices[2]["message"]["content"].is_null());  // cut while thinking
  EXPECT_EQ(choices[2]["message"]["reasoning_content"], "r2");
  const auto& usage = body["usage"];
  EXPECT_EQ(usage["prompt_tokens"], 3);              // once, not per choice
  EXPECT_EQ(usage["completion_tokens"], 2 + 4 + 1);  // summed over the choices
  EXPECT_EQ(usage["total_tokens"], 3 + 7);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 2);  // completion 0's
}

TEST(ResultWriter, OpenAICompletionWithThreeCompletionsIsOneRecordOfThreeTexts) {
  Request r = text_request("cmpl-n3");
  r.format = RequestFormat::kOpenAICompletion;
  std::ostringstream out;
  ResultWriter writer(out, fixed_options());
  writer.write(r, three_completions());
  const auto lines = parse_lines(out.str());
  ASSERT_EQ(lines.size(), 1u);  // one record for the request, not one per completion
  EXPECT_EQ(writer.num_ok(), 1);
  const auto& body = lines[0]["response"]["body"];
  EXPECT_EQ(body["object"], "text_completion");
  const auto& choices = body["choices"];
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices[0]["text"], "<think>r0</think>a0");
  EXPECT_EQ(choices[1]["text"], "<think>r1</think>a1");
  EXPECT_EQ(choices[2]["text"], "<think>r2");
  EXPECT_EQ(choices[0]["stop_reason"], "STOP");
  EXPECT_EQ(choices[1]["finish_reason"], "length");
  EXPECT_EQ(choices[2]["stop_reason"], 42);
  EXPECT_EQ(body["usage"]["completion_tokens"], 7);
  EXPECT_EQ(body["usage"]["total_tokens"], 10);
}

TEST(ResultWriter, OpenAIErrorRecordHasNoBodyAndAnErrorObject) {
  Request r = text_request("e-1");
  r.format = RequestFormat::kOpenAIChat;
  r.fail("only one completion per request is supported", "body.n");
  const auto j = error_json(r, fixed_options(), 0);
  EXPECT_EQ(j["custom_id"], "e-1");
  EXPECT_EQ(j["response"]["status_code"], 400);
  EXPECT_TRUE(j["response"]["body"].is_null());
  EXPECT_EQ(j["error"]["field"], "body.n");
  EXPECT_EQ(j["error"]["line"], 3);
  EXPECT_TRUE(j["error"]["code"].is_string());
}

TEST(ResultWriter, AnswersOfOneRunHaveDistinctIds) {
  Request r = text_request("x");
  r.format = RequestFormat::kOpenAICompletion;
  EXPECT_NE(result_json(r, output("a"), fixed_options(), 0)["id"],
            result_json(r, output("a"), fixed_options(), 1)["id"]);
}

TEST(ResultWriter, EachLineIsOnDiskAsSoonAsItIsWritten) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("nanovllm_results_" + std::to_string(getpid()) + ".jsonl");
  auto writer = ResultWriter::open(path, false, fixed_options());
  auto read_back = [&] {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_lines(ss.str());
  };
  writer->write(text_request("a"), output("x"));
  EXPECT_EQ(read_back().size(), 1u);  // the writer is still open: flushed, not buffered
  Request bad = text_request("b");
  bad.fail("oops", "prompt");
  writer->write_error(bad);
  const auto lines = read_back();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["id"], "b");
  writer.reset();
  std::filesystem::remove(path);
}

TEST(ResultWriter, InvalidUtf8InTheTextStillGivesValidJson) {
  // A completion cut inside a multi-byte character must not make the line unreadable.
  std::ostringstream out;
  ResultWriter writer(out, fixed_options());
  writer.write(text_request("u"), output("ok\xe4\xb8"));
  const auto j = parse_lines(out.str()).at(0);
  EXPECT_EQ(j["text"].get<std::string>().substr(0, 2), "ok");
}

// Token 7 = "hé" (3 bytes), 8 = "\xE4" (part of a character), 9 = "!".
ResultWriterOptions options_with_token_bytes() {
  ResultWriterOptions o = fixed_options();
  o.token_bytes = [](int32_t id) -> std::string {
    if (id == 7) return "h\xC3\xA9";
    if (id == 8) return "\xE4";
    return id == 9 ? "!" : "";
  };
  return o;
}

// output() with logprobs for its tokens 7, 8 (top 1 each) and prompt logprobs for tokens
// 2 and 3 of its 3-token prompt.
CompletionOutput output_with_logprobs() {
  CompletionOutput out = output("hé");
  out.logprobs =
      std::vector<PositionLogprobs>{{7, -0.5f, 1, {{7, -0.5f}}}, {8, -2.0f, 3, {{9, -0.25f}}}};
  out.cumulative_logprob = -2.5;
  out.prompt_logprobs = std::vector<PositionLogprobs>{{2, -1.0f, 1, {}}, {3, -3.0f, 2, {}}};
  return out;
}

TEST(ResultWriter, NativeLineHasNoLogprobsKeysWhenNoneWereAsked) {
  const auto j = result_json(text_request("a"), output("x"), options_with_token_bytes(), 0);
  EXPECT_FALSE(j.contains("logprobs"));
  EXPECT_FALSE(j.contains("cumulative_logprob"));
  EXPECT_FALSE(j.contains("prompt_logprobs"));
}

TEST(ResultWriter, NativeLogprobsAreVllmDictsPerTokenWithTheirSum) {
  Request r = text_request("lp");
  r.sampling_params.logprobs = 1;
  r.sampling_params.prompt_logprobs = 0;
  std::ostringstream out;
  ResultWriter writer(out, options_with_token_bytes());
  writer.write(r, output_with_logprobs());
  const auto j = parse_lines(out.str()).at(0);
  ASSERT_EQ(j["logprobs"].size(), 2u);
  EXPECT_EQ(j["logprobs"][0],
            (nlohmann::json{{"7", {{"logprob", -0.5}, {"rank", 1}, {"decoded_token", "hé"}}}}));
  // Sampled outside the top 1: N + 1 entries, the partial character as U+FFFD.
  ASSERT_EQ(j["logprobs"][1].size(), 2u);
  EXPECT_EQ(j["logprobs"][1]["8"]["rank"], 3);
  EXPECT_EQ(j["logprobs"][1]["8"]["decoded_token"], "\xEF\xBF\xBD");
  EXPECT_EQ(j["logprobs"][1]["9"]["logprob"], -0.25);
  EXPECT_EQ(j["cumulative_logprob"], -2.5);
  // vLLM's prompt list: null for the first prompt token, then one dict each.
  ASSERT_EQ(j["prompt_logprobs"].size(), 3u);
  EXPECT_TRUE(j["prompt_logprobs"][0].is_null());
  EXPECT_EQ(j["prompt_logprobs"][2]["3"]["rank"], 2);
}

TEST(ResultWriter, NativeLogprobsAskedButNotGivenAreNull) {
  // Completion 1 of n: prompt_logprobs come on completion 0's line.
  Request r = text_request("lp");
  r.sampling_params.logprobs = 0;
  r.sampling_params.prompt_logprobs = 2;
  CompletionOutput second = output("x");
  second.index = 1;
  const auto j = result_json(r, second, options_with_token_bytes(), 0);
  ASSERT_TRUE(j.contains("logprobs"));
  EXPECT_TRUE(j["logprobs"].is_null());
  EXPECT_TRUE(j["cumulative_logprob"].is_null());
  ASSERT_TRUE(j.contains("prompt_logprobs"));
  EXPECT_TRUE(j["prompt_logprobs"].is_null());
}

TEST(ResultWriter, OpenAIChatLogprobsAreContentEntriesWithBytesAndTopLogprobs) {
  Request r = text_request("chat-lp");
  r.format = RequestFormat::kOpenAIChat;
  r.kind = PromptKind::kChat;
  r.sampling_params.logprobs = 1;
  std::ostringstream out;
  ResultWriter writer(out, options_with_token_bytes());
  writer.write(r, output_with_logprobs());
  const auto body = parse_lines(out.str()).at(0)["response"]["body"];
  const auto& logprobs = body["choices"][0]["logprobs"];
  EXPECT_TRUE(logprobs["refusal"].is_null());
  ASSERT_EQ(logprobs["content"].size(), 2u);
  const auto& second = logprobs["content"][1];
  EXPECT_EQ(second["token"], "\xEF\xBF\xBD");
  EXPECT_EQ(second["bytes"], nlohmann::json::array({0xE4}));
  EXPECT_EQ(second["logprob"], -2.0);
  EXPECT_EQ(second["top_logprobs"],
            (nlohmann::json::array({{{"token", "!"}, {"logprob", -0.25}, {"bytes", {33}}}})));
  EXPECT_FALSE(body.contains("prompt_logprobs"));  // not asked
}

TEST(ResultWriter, OpenAICompletionLogprobsAreParallelListsWithTextOffsets) {
  Request r = text_request("cmpl-lp");
  r.format = RequestFormat::kOpenAICompletion;
  r.sampling_params.logprobs = 1;
  const auto j = result_json(r, output_with_logprobs(), options_with_token_bytes(), 0);
  const auto& logprobs = j["response"]["body"]["choices"][0]["logprobs"];
  EXPECT_EQ(logprobs["tokens"], (nlohmann::json{"hé", "\xEF\xBF\xBD"}));
  EXPECT_EQ(logprobs["token_logprobs"], (nlohmann::json{-0.5, -2.0}));
  EXPECT_EQ(logprobs["text_offset"], (nlohmann::json{0, 2}));  // "hé" is 2 characters
  EXPECT_EQ(logprobs["top_logprobs"][1], (nlohmann::json{{"\xEF\xBF\xBD", -2.0}, {"!", -0.25}}));
}

TEST(ResultWriter, OpenAIPromptLogprobsSitAtTheTopOfTheBodyFromCompletionZero) {
  Request r = text_request("chat-plp");
  r.format = RequestFormat::kOpenAIChat;
  r.kind = PromptKind::kChat;
  r.sampling_params.prompt_logprobs = 0;
  std::vector<CompletionOutput> outs = {output("b"), output_with_logprobs()};
  outs[0].index = 1;  // given out of order: completion 0's prompt logprobs still count
  outs[1].index = 0;
  const auto body = result_json(r, outs, options_with_token_bytes(), 0)["response"]["body"];
  ASSERT_EQ(body["prompt_logprobs"].size(), 3u);
  EXPECT_TRUE(body["prompt_logprobs"][0].is_null());
  EXPECT_EQ(body["prompt_logprobs"][1]["2"]["logprob"], -1.0);
  EXPECT_TRUE(body["choices"][1]["logprobs"].is_null());  // logprobs not asked
}

TEST(ResultWriter, SuccessfulResultsAreRecognisedInBothShapes) {
  std::string id;
  Request native = text_request("n");
  EXPECT_TRUE(is_successful_result(result_json(native, output("x"), fixed_options(), 0), id));
  EXPECT_EQ(id, "n");
  native.fail("bad", "prompt");
  EXPECT_FALSE(is_successful_result(error_json(native, fixed_options(), 0), id));
  Request batch = text_request("b");
  batch.format = RequestFormat::kOpenAIChat;
  EXPECT_TRUE(is_successful_result(result_json(batch, output("x"), fixed_options(), 0), id));
  EXPECT_EQ(id, "b");
  batch.fail("bad", "body.n");
  EXPECT_FALSE(is_successful_result(error_json(batch, fixed_options(), 0), id));
  EXPECT_FALSE(is_successful_result(nlohmann::json{{"foo", 1}}, id));
}

}  // namespace
}  // namespace nanovllm
