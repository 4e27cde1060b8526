// nanovllm-launch end to end on the CPU backend with the real binary: --tp 1 against --tp 2,
// decoded text and reasoning, bad input, configuration errors, --resume, the OpenAI batch shape.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/tokenizer.h"
#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

// ---- --tp 1 and --tp 2 agree ----------------------------------------------------------

constexpr const char* kMixedPrompts =
    R"({"id": "text-greedy", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}
{"id": "ids-greedy", "prompt_token_ids": [785, 6722, 315, 9625, 374], "max_tokens": 8, "temperature": 0}
{"id": "chat-greedy", "messages": [{"role": "user", "content": "What is 17 * 23?"}], "max_tokens": 8, "temperature": 0}
{"id": "chat-plain", "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}], "enable_thinking": false, "max_tokens": 6, "temperature": 0}
{"id": "sampled-seeded", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 1.0, "top_p": 0.9, "seed": 7}
{"id": "sampled-derived", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 1.0}
)";

struct TpRuns {
  int rc1 = -1, rc2 = -1;
  std::map<std::string, Json> tp1, tp2;
  std::string err1, err2;
};

const TpRuns& tp_runs() {
  static const TpRuns runs = [] {
    TpRuns r;
    const fs::path prompts = write_file("mixed.jsonl", kMixedPrompts);
    const Launch a =
        spawn(prompts, "mixed-tp1", {"--tp", "1", "-o", (work_dir() / "mixed-tp1.jsonl").string()});
    r.rc1 = finish(a);
    const Launch b =
        spawn(prompts, "mixed-tp2", {"--tp", "2", "-o", (work_dir() / "mixed-tp2.jsonl").string()});
    r.rc2 = finish(b);
    r.err1 = read_text(a.err);
    r.err2 = read_text(b.err);
    r.tp1 = by_id(read_jsonl(work_dir() / "mixed-tp1.jsonl"));
    r.tp2 = by_id(read_jsonl(work_dir() / "mixed-tp2.jsonl"));
    return r;
  }();
  return runs;
}

void expect_same(const TpRuns& r, const std::string& id) {
  ASSERT_TRUE(r.tp1.count(id) && r.tp2.count(id)) << id << "\n" << r.err1 << r.err2;
  EXPECT_EQ(r.tp1.at(id)["token_ids"], r.tp2.at(id)["token_ids"]) << id;
  EXPECT_EQ(r.tp1.at(id)["text"], r.tp2.at(id)["text"]) << id;
  EXPECT_EQ(r.tp1.at(id)["finish_reason"], r.tp2.at(id)["finish_reason"]) << id;
}

TEST(LaunchE2e, TpOneAndTpTwoGiveIdenticalGreedyTextTokenIdAndChatResults) {
  REQUIRE_TOKENIZER();
  const TpRuns& r = tp_runs();
  ASSERT_EQ(r.rc1, 0) << r.err1;
  ASSERT_EQ(r.rc2, 0) << r.err2;
  ASSERT_EQ(r.tp1.size(), 6u);
  ASSERT_EQ(r.tp2.size(), 6u);
  for (const char* id : {"text-greedy", "ids-greedy", "chat-greedy", "chat-plain"})
    expect_same(r, id);
  EXPECT_EQ(r.tp1.at("ids-greedy")["prompt_tokens"], 5);
  EXPECT_EQ(r.tp1.at("text-greedy")["token_ids"].size(), 8u);
}

TEST(LaunchE2e, TpOneAndTpTwoGiveIdenticalSeededSampledResults) {
  REQUIRE_TOKENIZER();
  const TpRuns& r = tp_runs();
  ASSERT_EQ(r.rc2, 0) << r.err2;
  expect_same(r, "sampled-seeded");
  expect_same(r, "sampled-derived");  // seed derived from --seed and the id
}

TEST(LaunchE2e, ResultTextIsTheTokenizerDecodeAndChatCarriesReasoning) {
  REQUIRE_TOKENIZER();
  const TpRuns& r = tp_runs();
  ASSERT_EQ(r.rc2, 0) << r.err2;
  const Tokenizer tok = Tokenizer::from_file((tokenizer_dir() / "tokenizer.json").string());
  for (const char* id : {"text-greedy", "ids-greedy", "sampled-seeded"}) {
    const Json& j = r.tp2.at(id);
    EXPECT_EQ(j["text"], tok.decode(j["token_ids"].get<std::vector<int32_t>>(), true)) << id;
    EXPECT_EQ(j["completion_tokens"], j["token_ids"].size()) << id;
  }
  // Thinking on, cut off by max_tokens before </think>: all of it is reasoning, no answer.
  const Json& chat = r.tp2.at("chat-greedy");
  ASSERT_TRUE(chat.contains("reasoning_content"));
  EXPECT_EQ(chat["finish_reason"], "length");
  EXPECT_TRUE(chat["text"].is_null());
  EXPECT_EQ(chat["reasoning_content"],
            tok.decode(chat["token_ids"].get<std::vector<int32_t>>(), true));
}

TEST(LaunchE2e, DerivedSeedDoesNotDependOnBatchComposition) {
  REQUIRE_TOKENIZER();
  const fs::path alone = write_file(
      "alone.jsonl",
      R"({"id": "sampled-derived", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 1.0})"
      "\n");
  const Launch l =
      spawn(alone, "alone", {"--tp", "2", "-o", (work_dir() / "alone.jsonl.out").string()});
  ASSERT_EQ(finish(l), 0) << run_args(l);
  const auto lines = read_jsonl(work_dir() / "alone.jsonl.out");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["token_ids"], tp_runs().tp1.at("sampled-derived")["token_ids"]);
}

// ---- failures and signals ---------------------------------------------------------------

TEST(LaunchE2e, TwoConcurrentRunsDoNotInterfere) {
  REQUIRE_TOKENIZER();
  const std::string prefix = unique_prefix();  // shared: each run must leave the other's alone
  const fs::path prompts = write_file("mixed2.jsonl", kMixedPrompts);
  const Launch a =
      spawn(prompts, "conc-a", {"--tp", "2", "-o", (work_dir() / "conc-a.out").string()}, prefix);
  const Launch b =
      spawn(prompts, "conc-b", {"--tp", "2", "-o", (work_dir() / "conc-b.out").string()}, prefix);
  EXPECT_EQ(finish(a), 0) << run_args(a);
  EXPECT_EQ(finish(b), 0) << run_args(b);
  const auto ra = by_id(read_jsonl(work_dir() / "conc-a.out"));
  const auto rb = by_id(read_jsonl(work_dir() / "conc-b.out"));
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), 6u);
  for (const auto& [id, j] : ra) {
    EXPECT_EQ(j["token_ids"], rb.at(id)["token_ids"]) << id;
    EXPECT_EQ(j["token_ids"], tp_runs().tp1.at(id)["token_ids"]) << id;
  }
  EXPECT_TRUE(segments(prefix).empty());
}

// ---- bad input, configuration errors, --resume, OpenAI batch ---------------------------

TEST(LaunchE2e, EachBadLineGetsAnErrorNamingLineAndFieldWhileValidLinesRun) {
  REQUIRE_TOKENIZER();
  std::string ids_200 = "[";
  for (int i = 0; i < 200; ++i) ids_200 += (i ? ", " : "") + std::to_string(100 + i);
  ids_200 += "]";
  const fs::path prompts = write_file(
      "bad.jsonl",
      std::string(R"({"id": "ok1", "prompt": "Hello", "max_tokens": 4, "temperature": 0})") + "\n" +
          R"({"id": "broken", "prompt": )" + "\n" +
          R"({"id": "neg-temp", "prompt": "Hi", "temperature": -1})" + "\n" +
          R"({"id": "big-token", "prompt_token_ids": [1, 999999]})" + "\n" +
          R"({"id": "too-long", "prompt_token_ids": )" + ids_200 + R"(, "max_tokens": 100})" +
          "\n" + R"({"id": "no-prompt", "max_tokens": 4})" + "\n" +
          R"({"id": "ok2", "prompt_token_ids": [1, 2, 3], "max_tokens": 4, "temperature": 0})" +
          "\n");
  const Launch l = spawn(prompts, "bad", {"--tp", "2", "-o", (work_dir() / "bad.out").string()});
  EXPECT_EQ(finish(l), 1) << run_args(l);
  const auto lines = read_jsonl(work_dir() / "bad.out");
  ASSERT_EQ(lines.size(), 7u);
  std::map<int64_t, Json> errors;  // by line number
  std::map<std::string, Json> ok;
  for (const Json& j : lines) {
    if (j.contains("error"))
      errors[j["error"]["line"].get<int64_t>()] = j;
    else
      ok[j["id"]] = j;
  }
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok["ok1"]["token_ids"].size(), 4u);
  EXPECT_EQ(ok["ok2"]["token_ids"].size(), 4u);
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_TRUE(errors[2]["error"]["field"].is_null());  // the whole line: malformed JSON
  EXPECT_EQ(errors[3]["error"]["field"], "temperature");
  EXPECT_EQ(errors[4]["error"]["field"], "prompt_token_ids[1]");
  EXPECT_EQ(errors[5]["error"]["field"], "max_tokens");
  EXPECT_EQ(errors[6]["error"]["field"], "prompt");
  for (auto& [line, j] : errors) {
    EXPECT_EQ(j["finish_reason"], "error") << line;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << line;
  }
}

TEST(LaunchE2e, KvCacheSmallerThanOneSequenceIsRefusedAtStartUpWithTheNumbers) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = write_file(
      "kv-small.jsonl", R"({"id": "fits", "prompt": "Hi", "max_tokens": 2, "temperature": 0})"
                        "\n");
  // 4 blocks of 16 tokens cannot hold one sequence of max_model_len 256 (the tests' limit):
  // before, every long request failed on its own line; now the run is refused before any
  // weight loads.
  for (const char* tp : {"1", "2"}) {
    const Launch l = spawn(prompts, std::string("kv-small-") + tp,
                           {"--tp", tp, "--num-gpu-blocks-override", "4"});
    EXPECT_EQ(finish(l), 2) << run_args(l);
    const std::string err = read_text(l.err);
    EXPECT_NE(err.find("the KV cache holds 4 blocks of 16 tokens, fewer than the 16 blocks one "
                       "sequence of max_model_len 256 tokens needs"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("--max-model-len"), std::string::npos) << err;
    EXPECT_EQ(err.find("model loaded"), std::string::npos) << err;
  }
  // The same cache is enough once max_model_len fits it.
  const Launch ok = spawn(prompts, "kv-small-ok",
                          {"--tp", "1", "--num-gpu-blocks-override", "4", "--max-model-len", "64"});
  EXPECT_EQ(finish(ok), 0) << run_args(ok);
}

TEST(LaunchE2e, InvalidEngineLimitsExitTwoBeforeAnyRankStarts) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = write_file("cfg.jsonl", R"({"prompt": "Hi"})"
                                                   "\n");
  // Without chunked prefill a step must hold a whole max_model_len prompt (256 here).
  const Launch l =
      spawn(prompts, "cfg",
            {"--tp", "2", "--max-num-batched-tokens", "128", "--no-enable-chunked-prefill"});
  EXPECT_EQ(finish(l), 2);
  const std::string err = read_text(l.err);
  EXPECT_NE(err.find("max-num-batched-tokens"), std::string::npos) << err;
  EXPECT_EQ(err.find("started"), std::string::npos) << err;
  EXPECT_TRUE(segments(l.prefix).empty());
}

TEST(LaunchE2e, ResumeAnswersOnlyWhatFailedOrIsMissingAndKeepsEarlierLines) {
  REQUIRE_TOKENIZER();
  const fs::path out = work_dir() / "resume.out";
  const std::string a = R"({"id": "a", "prompt": "Hello", "max_tokens": 4, "temperature": 0})";
  const std::string c =
      R"({"id": "c", "prompt_token_ids": [5, 6, 7], "max_tokens": 4, "temperature": 0})";
  const fs::path first = write_file(
      "resume1.jsonl", a + "\n" + R"({"id": "b", "prompt": "Hi", "top_p": 7})" + "\n" + c + "\n");
  const Launch l1 = spawn(first, "resume1", {"--tp", "1", "-o", out.string()});
  ASSERT_EQ(finish(l1), 1) << run_args(l1);
  const auto before = by_id(read_jsonl(out));
  ASSERT_EQ(before.size(), 3u);
  ASSERT_EQ(before.at("b")["finish_reason"], "error");

  const fs::path second =
      write_file("resume2.jsonl",
                 a + "\n" + R"({"id": "b", "prompt": "Hi", "max_tokens": 3, "temperature": 0})" +
                     "\n" + c + "\n");
  const Launch l2 = spawn(second, "resume2", {"--tp", "2", "--resume", "-o", out.string()});
  ASSERT_EQ(finish(l2), 0) << run_args(l2);
  const auto lines = read_jsonl(out);
  ASSERT_EQ(lines.size(), 3u);  // the error line replaced, nothing answered twice
  const auto after = by_id(lines);
  EXPECT_EQ(after.at("a"), before.at("a"));
  EXPECT_EQ(after.at("c"), before.at("c"));
  EXPECT_EQ(after.at("b")["finish_reason"], "length");
  EXPECT_EQ(after.at("b")["token_ids"].size(), 3u);
  EXPECT_NE(read_text(l2.err).find("2 of 3 requests already answered"), std::string::npos)
      << run_args(l2);
}

TEST(LaunchE2e, ResumeOfANativeNRequestWritesOnlyItsMissingCompletionWithTheSameTokens) {
  REQUIRE_TOKENIZER();
  const fs::path out = work_dir() / "resume-n.out";
  // The tiny model is so peaked that only a high temperature makes completions differ; there
  // --tp 1 and --tp 2 rounding flips draws, so both runs use --tp 1.
  const fs::path prompts = write_file(
      "resume-n.jsonl",
      R"({"id": "m", "prompt": "Once upon a time", "n": 3, "max_tokens": 6, "temperature": 50, "seed": 7})"
      "\n");
  const Launch l1 = spawn(prompts, "resume-n1", {"--tp", "1", "-o", out.string()});
  ASSERT_EQ(finish(l1), 0) << run_args(l1);
  std::map<int, Json> first;  // index -> line: one line per completion
  for (const Json& line : read_jsonl(out)) {
    EXPECT_EQ(line["id"], "m");
    first[line["index"].get<int>()] = line;
  }
  ASSERT_EQ(first.size(), 3u);
  ASSERT_TRUE(first.contains(0) && first.contains(1) && first.contains(2));
  EXPECT_EQ(first.at(1)["prompt_tokens"], first.at(0)["prompt_tokens"]);  // on every line
  // Each completion samples its own tokens (else the check below would prove little).
  EXPECT_NE(first.at(1)["token_ids"], first.at(0)["token_ids"]);
  EXPECT_NE(first.at(1)["token_ids"], first.at(2)["token_ids"]);
  // As a crash before completion 1 finished would leave it.
  write_file("resume-n.out", first.at(2).dump() + "\n" + first.at(0).dump() + "\n");

  const Launch l2 = spawn(prompts, "resume-n2", {"--tp", "1", "--resume", "-o", out.string()});
  ASSERT_EQ(finish(l2), 0) << run_args(l2);
  const auto lines = read_jsonl(out);
  ASSERT_EQ(lines.size(), 3u);  // only the missing completion was written
  EXPECT_EQ(lines[0], first.at(2));
  EXPECT_EQ(lines[1], first.at(0));
  EXPECT_EQ(lines[2]["index"], 1);
  // Run alone with its completion seed, it samples what it did as completion 1 of 3.
  EXPECT_EQ(lines[2]["token_ids"], first.at(1)["token_ids"]);
  EXPECT_EQ(lines[2]["text"], first.at(1)["text"]);
  EXPECT_EQ(lines[2]["finish_reason"], first.at(1)["finish_reason"]);
}

TEST(LaunchE2e, OpenAiBatchFileIsAnsweredInTheBatchOutputShape) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = write_file(
      "batch.jsonl",
      std::string(
          R"({"custom_id": "chat-1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 5, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}}})") +
          "\n" +
          R"({"custom_id": "cmpl-1", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "The sky is", "max_tokens": 4, "temperature": 0}})" +
          "\n" +
          R"({"custom_id": "bad-1", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "x", "n": 65}})" +
          "\n" +
          R"({"custom_id": "n-2", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "Hi"}], "n": 2, "max_tokens": 3, "temperature": 1, "seed": 3}})" +
          "\n");
  const Launch l = spawn(prompts, "batch", {"--tp", "2"});  // results on stdout
  EXPECT_EQ(finish(l), 1) << run_args(l);
  const auto r = by_id(read_jsonl(work_dir() / "batch.stdout"));
  ASSERT_EQ(r.size(), 4u);  // one record per request, n = 2 included
  const Json& chat = r.at("chat-1");
  EXPECT_EQ(chat["response"]["status_code"], 200);
  EXPECT_TRUE(chat["error"].is_null());
  const Json& body = chat["response"]["body"];
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(body["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(body["usage"]["total_tokens"], body["usage"]["prompt_tokens"].get<int>() + 5);
  const Json& cmpl = r.at("cmpl-1")["response"]["body"];
  EXPECT_EQ(cmpl["object"], "text_completion");
  EXPECT_TRUE(cmpl["choices"][0]["text"].is_string());
  EXPECT_EQ(cmpl["usage"]["completion_tokens"], 4);
  const Json& bad = r.at("bad-1");
  EXPECT_EQ(bad["response"]["status_code"], 400);
  EXPECT_TRUE(bad["response"]["body"].is_null());
  EXPECT_EQ(bad["error"]["line"], 3);
  EXPECT_EQ(bad["error"]["field"], "body.n");
  // n = 2: both completions in one record, choices by index, usage summed over them.
  const Json& two = r.at("n-2")["response"]["body"];
  ASSERT_EQ(two["choices"].size(), 2u);
  int completion_tokens = 0;
  for (int i = 0; i < 2; ++i) {
    const Json& choice = two["choices"][i];
    EXPECT_EQ(choice["index"], i);
    EXPECT_EQ(choice["finish_reason"], "length");
    EXPECT_TRUE(choice.contains("stop_reason") && choice["stop_reason"].is_null());
    EXPECT_EQ(choice["message"]["role"], "assistant");
    completion_tokens += 3;
  }
  EXPECT_EQ(two["usage"]["completion_tokens"], completion_tokens);
  EXPECT_EQ(two["usage"]["total_tokens"],
            two["usage"]["prompt_tokens"].get<int>() + completion_tokens);
}

}  // namespace
}  // namespace nanovllm::testing
