// nanovllm-launch with vLLM's host-side request fields on the CPU backend, on the tiny model:
// stop strings and stop_token_ids cut a greedy free run where it must, min_tokens holds back
// an eos the model really samples (a copy of the tiny model whose eos is its own first greedy
// token), n completions are distinct and reproducible, and --tp 1 and --tp 2 agree on all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/tokenizer.h"
#include "layers/model_presets.h"
#include "layers/model_writer.h"
#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using Key = std::pair<std::string, int>;  // (id, index)

std::map<Key, Json> by_id_and_index(const std::vector<Json>& lines) {
  std::map<Key, Json> out;
  for (const Json& j : lines) out[{j["id"].get<std::string>(), j.value("index", 0)}] = j;
  return out;
}

struct LaunchRun {
  int rc = -1;
  std::string err;
  std::map<Key, Json> results;
};

LaunchRun launch(const std::string& name, const std::string& prompts,
                 std::vector<std::string> flags, const fs::path& model = tiny_model()) {
  const fs::path out = work_dir() / (name + ".out.jsonl");
  flags.insert(flags.end(), {"-o", out.string()});
  const Launch l = spawn_with_model(model, write_file(name + ".jsonl", prompts), name, flags);
  LaunchRun r;
  r.rc = finish(l);
  r.err = read_text(l.err);
  if (fs::exists(out)) r.results = by_id_and_index(read_jsonl(out));
  return r;
}

std::vector<int32_t> ids_of(const Json& j) {
  return j["token_ids"].get<std::vector<int32_t>>();
}

constexpr const char* kPrompt = "The capital of France is";

// The greedy free run every expectation is cut from: 16 tokens, eos ignored.
const Json& free_run() {
  static const Json line = [] {
    const LaunchRun r = launch("free",
                               std::string(R"({"id": "free", "prompt": ")") + kPrompt +
                                   R"(", "max_tokens": 16, "temperature": 0, "ignore_eos": true})"
                                   "\n",
                               {"--tp", "1"});
    EXPECT_EQ(r.rc, 0) << r.err;
    return r.results.count({"free", 0}) ? r.results.at({"free", 0}) : Json();
  }();
  return line;
}

Json request(const std::string& id, Json fields) {
  fields["id"] = id;
  fields["prompt"] = kPrompt;
  if (!fields.contains("temperature")) fields["temperature"] = 0;
  if (!fields.contains("max_tokens")) fields["max_tokens"] = 16;
  fields["ignore_eos"] = true;
  return fields;
}

struct FieldRuns {
  std::vector<int32_t> free_ids;
  std::string free_text, stop;
  LaunchRun tp1, tp2;
};

const FieldRuns& field_runs() {
  static const FieldRuns runs = [] {
    FieldRuns f;
    const Json& free = free_run();
    if (free.is_null()) return f;
    f.free_ids = ids_of(free);
    f.free_text = free["text"].get<std::string>();
    const Tokenizer tok = Tokenizer::from_file((tokenizer_dir() / "tokenizer.json").string());
    // A stop made of the text of tokens 3 and 4 (it may occur earlier: the first one counts).
    f.stop = tok.decode(std::vector<int32_t>(f.free_ids.begin() + 3, f.free_ids.begin() + 5), true);
    std::string lines;
    for (const Json& j :
         {request("stop-str", {{"stop", f.stop}}),
          request("stop-str-incl", {{"stop", {f.stop}}, {"include_stop_str_in_output", true}}),
          request("stop-id", {{"stop_token_ids", {f.free_ids[3]}}}),
          request("stop-id-min", {{"stop_token_ids", {f.free_ids[0]}}, {"min_tokens", 2}}),
          // The tiny model is so peaked that only a very high temperature samples apart.
          request("n3", {{"n", 3}, {"temperature", 50.0}, {"seed", 5}, {"max_tokens", 8}}),
          request("n1", {{"temperature", 50.0}, {"seed", 5}, {"max_tokens", 8}}),
          // Device-side fields: the free run's second token banned, all penalties on.
          request("penalized", {{"logprobs", 3},
                                {"prompt_logprobs", 2},
                                {"repetition_penalty", 1.5},
                                {"presence_penalty", 0.5},
                                {"frequency_penalty", 0.5},
                                {"logit_bias", {{std::to_string(f.free_ids[1]), -100}}}}),
          request("lp-plain", {{"logprobs", 2}}),
          request("bias-up", {{"logit_bias", {{"1000", 100}}}, {"max_tokens", 6}})})
      lines += j.dump() + "\n";
    f.tp1 = launch("fields-tp1", lines, {"--tp", "1"});
    f.tp2 = launch("fields-tp2", lines, {"--tp", "2"});
    return f;
  }();
  return runs;
}

TEST(LaunchRequestFields, StopStringsAndStopTokenIdsCutTheGreedyRunWhereItMust) {
  REQUIRE_TOKENIZER();
  const FieldRuns& f = field_runs();
  ASSERT_EQ(f.tp1.rc, 0) << f.tp1.err;
  ASSERT_FALSE(f.stop.empty());
  const size_t at = f.free_text.find(f.stop);
  ASSERT_NE(at, std::string::npos);
  for (const bool include : {false, true}) {
    const Json& j = f.tp1.results.at({include ? "stop-str-incl" : "stop-str", 0});
    EXPECT_EQ(j["finish_reason"], "stop");
    EXPECT_EQ(j["stop_reason"], f.stop);
    EXPECT_EQ(j["text"], f.free_text.substr(0, include ? at + f.stop.size() : at));
    // The tokens up to the one that completed the stop: a prefix of the free run.
    const std::vector<int32_t> ids = ids_of(j);
    ASSERT_LE(ids.size(), f.free_ids.size());
    EXPECT_TRUE(std::equal(ids.begin(), ids.end(), f.free_ids.begin()));
    EXPECT_LE(ids.size(), 5u);
  }
  const Json& by_id = f.tp1.results.at({"stop-id", 0});
  const auto first = std::find(f.free_ids.begin(), f.free_ids.end(), f.free_ids[3]);
  EXPECT_EQ(ids_of(by_id), std::vector<int32_t>(f.free_ids.begin(), first + 1));
  EXPECT_EQ(by_id["finish_reason"], "stop");
  EXPECT_EQ(by_id["stop_reason"], f.free_ids[3]);
}

TEST(LaunchRequestFields, MinTokensMasksAStopTokenTheModelWouldSampleFirst) {
  REQUIRE_TOKENIZER();
  const FieldRuns& f = field_runs();
  ASSERT_EQ(f.tp1.rc, 0) << f.tp1.err;
  const std::vector<int32_t> ids = ids_of(f.tp1.results.at({"stop-id-min", 0}));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_NE(ids[0], f.free_ids[0]);  // masked: the greedy pick is the next best
  EXPECT_NE(ids[1], f.free_ids[0]);
}

TEST(LaunchRequestFields, NCompletionsAreDistinctAndTheFirstIsTheSeedsOwnRun) {
  REQUIRE_TOKENIZER();
  const FieldRuns& f = field_runs();
  ASSERT_EQ(f.tp1.rc, 0) << f.tp1.err;
  std::set<std::vector<int32_t>> distinct;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(f.tp1.results.count({"n3", i})) << "completion " << i;
    const Json& j = f.tp1.results.at({"n3", i});
    EXPECT_EQ(j["index"], i);
    distinct.insert(ids_of(j));
  }
  EXPECT_GE(distinct.size(), 2u);
  // Completion 0 samples with the request's own seed: the n = 1 request's tokens.
  EXPECT_EQ(ids_of(f.tp1.results.at({"n3", 0})), ids_of(f.tp1.results.at({"n1", 0})));
}

TEST(LaunchRequestFields, TpOneAndTpTwoGiveIdenticalGreedyResultsForEveryField) {
  REQUIRE_TOKENIZER();
  const FieldRuns& f = field_runs();
  ASSERT_EQ(f.tp1.rc, 0) << f.tp1.err;
  ASSERT_EQ(f.tp2.rc, 0) << f.tp2.err;
  ASSERT_EQ(f.tp1.results.size(), 11u);
  ASSERT_EQ(f.tp2.results.size(), 11u);
  for (const auto& [key, j] : f.tp1.results) {
    // At temperature 50 the shards' rounding moves draws: those rows are checked for shape.
    if (key.first == "n3" || key.first == "n1") continue;
    const Json& k = f.tp2.results.at(key);
    for (const char* field : {"token_ids", "text", "finish_reason", "stop_reason"})
      EXPECT_EQ(j[field], k[field]) << key.first << "/" << key.second << " " << field;
    // Logprobs: the sampled tokens' ranks equal; values within the bf16 rounding the shards'
    // partial sums add (this tiny model puts its alternatives 25-45 nats down, where that is
    // up to 1% of the value).
    for (const char* field : {"logprobs", "prompt_logprobs"}) {
      ASSERT_EQ(j.contains(field), k.contains(field)) << key.first << " " << field;
      if (!j.contains(field) || j[field].is_null()) continue;
      ASSERT_EQ(j[field].size(), k[field].size()) << key.first << " " << field;
      for (size_t i = 0; i < j[field].size(); ++i) {
        const Json &a = j[field][i], &b = k[field][i];
        if (a.is_null()) {
          EXPECT_TRUE(b.is_null());
          continue;
        }
        // An alternative may trade places with a near-tie at the cut: then its logprob is
        // within rounding of the other run's last alternative.
        double b_lowest = 0;
        for (const auto& [id, entry] : b.items())
          b_lowest = std::min(b_lowest, entry["logprob"].get<double>());
        for (const auto& [id, entry] : a.items()) {
          const std::string where = key.first + " " + field + "[" + std::to_string(i) + "] " + id;
          const double lp = entry["logprob"].get<double>();
          if (!b.contains(id)) {
            EXPECT_NEAR(lp, b_lowest, 2e-3 + 0.02 * std::abs(lp)) << where;
            continue;
          }
          EXPECT_NEAR(lp, b[id]["logprob"].get<double>(), 2e-3 + 0.02 * std::abs(lp)) << where;
          const bool sampled = field == std::string("logprobs") &&
                               id == std::to_string(j["token_ids"][i].get<int>());
          if (sampled) {
            EXPECT_EQ(entry["rank"], b[id]["rank"]) << where;
          }
        }
      }
    }
  }
}

TEST(LaunchRequestFields, LogitBiasAndPenaltiesSteerTheGreedyRunAndLogprobsFollowIt) {
  REQUIRE_TOKENIZER();
  const FieldRuns& f = field_runs();
  ASSERT_EQ(f.tp1.rc, 0) << f.tp1.err;
  // -100 on the free run's second token: it never comes; the penalties move the run off the
  // free one, which (a tiny random model) repeats its tokens.
  const Json& pen = f.tp1.results.at({"penalized", 0});
  const std::vector<int32_t> ids = ids_of(pen);
  for (const int32_t id : ids) EXPECT_NE(id, f.free_ids[1]);
  EXPECT_NE(ids, f.free_ids);
  ASSERT_EQ(pen["logprobs"].size(), ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const Json& entry = pen["logprobs"][i];
    const std::string id = std::to_string(ids[i]);
    ASSERT_TRUE(entry.contains(id)) << i;
    EXPECT_LE(entry[id]["logprob"].get<double>(), 0.0);
    EXPECT_GE(entry.size(), 3u);  // the top 3, plus the sampled token when outside them
    sum += entry[id]["logprob"].get<double>();
  }
  EXPECT_NEAR(pen["cumulative_logprob"].get<double>(), sum, 1e-3);
  // prompt_logprobs: one entry per prompt token, the first null.
  EXPECT_EQ(pen["prompt_logprobs"].size(), pen["prompt_tokens"].get<size_t>());
  EXPECT_TRUE(pen["prompt_logprobs"][0].is_null());
  // Without processing the greedy token is the raw argmax: rank 1 (the raw distribution's).
  const Json& plain = f.tp1.results.at({"lp-plain", 0});
  EXPECT_EQ(ids_of(plain), f.free_ids);
  for (size_t i = 0; i < f.free_ids.size(); ++i)
    EXPECT_EQ(plain["logprobs"][i][std::to_string(f.free_ids[i])]["rank"], 1) << i;
  // +100 on token 1000: greedy takes it every step; its raw logprob stays the model's own.
  const Json& up = f.tp1.results.at({"bias-up", 0});
  EXPECT_EQ(ids_of(up), std::vector<int32_t>(6, 1000));
  EXPECT_FALSE(up.contains("logprobs") && !up["logprobs"].is_null());
}

TEST(LaunchRequestFields, BadLogprobsPenaltyAndBiasLinesFailAloneNamingLineAndField) {
  REQUIRE_TOKENIZER();
  std::string lines = request("ok", {{"max_tokens", 4}}).dump() + "\n";
  for (const Json& bad :
       {request("lp", {{"logprobs", 25}}), request("pen", {{"presence_penalty", 2.5}}),
        request("bias", {{"logit_bias", {{"999999999", 1}}}})})
    lines += bad.dump() + "\n";
  const LaunchRun r = launch("bad-logprobs", lines, {"--tp", "1"});
  EXPECT_EQ(r.rc, 1) << r.err;  // some request got an error result
  ASSERT_EQ(r.results.size(), 4u) << r.err;
  EXPECT_EQ(r.results.at({"ok", 0})["finish_reason"], "length");
  const auto expect_error = [&r](const std::string& id, int line, const std::string& field,
                                 const std::string& words) {
    const Json& j = r.results.at({id, 0});
    EXPECT_EQ(j["finish_reason"], "error") << id;
    EXPECT_EQ(j["error"]["line"], line) << id;
    EXPECT_EQ(j["error"]["field"], field) << id;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(words), std::string::npos)
        << j["error"];
  };
  expect_error("lp", 2, "logprobs", "must be in [0, 20], got 25");
  expect_error("pen", 3, "presence_penalty", "must be in [-2, 2], got 2.5");
  expect_error("bias", 4, "logit_bias.999999999", "outside the vocabulary");
}

TEST(LaunchRequestFields, MinTokensHoldsBackAnEosTheModelSamples) {
  REQUIRE_TOKENIZER();
  const Json& free = free_run();
  ASSERT_FALSE(free.is_null());
  const int32_t first = ids_of(free)[0];
  // The same weights (seed 1), with the model's first greedy token as its eos.
  ModelConfig config = model_preset("tiny");
  config.eos_token_ids = {first};
  ModelWriterOptions options;
  options.preset = "tiny";
  options.seed = 1;
  options.tokenizer_dir = tokenizer_dir();
  const fs::path model = work_dir() / "tiny-eos";
  write_model_folder(config, model, options);
  const std::string base =
      std::string(R"("prompt": ")") + kPrompt + R"(", "max_tokens": 8, "temperature": 0)";
  const LaunchRun r = launch(
      "eos",
      "{\"id\": \"eos\", " + base + "}\n{\"id\": \"eos-min\", " + base + ", \"min_tokens\": 4}\n",
      {"--tp", "1"}, model);
  ASSERT_EQ(r.rc, 0) << r.err;
  const Json& at_once = r.results.at({"eos", 0});
  EXPECT_EQ(ids_of(at_once), std::vector<int32_t>{first});
  EXPECT_EQ(at_once["finish_reason"], "stop");
  EXPECT_TRUE(at_once["stop_reason"].is_null());  // eos is not a stop_token_ids entry
  const std::vector<int32_t> held = ids_of(r.results.at({"eos-min", 0}));
  ASSERT_GE(held.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NE(held[i], first) << "token " << i;
}

}  // namespace
}  // namespace nanovllm::testing
