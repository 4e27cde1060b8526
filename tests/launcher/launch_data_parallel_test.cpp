// nanovllm-launch --data-parallel-size end to end on the CPU backend (tiny model, real
// tokenizer): replicas give the same completions as one engine (seeded sampling, derived
// seeds, n > 1, OpenAI lines), write one results file (or stdout) of whole lines, one progress
// summary with per-replica figures in the log; a stop signal and --resume write nothing
// twice; kill -9 of one rank of one replica ends the run within 10 s naming both; --shard
// splits the file so the shards joined equal the whole.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/launcher/launch_test_support.h"

namespace nanovllm::testing {
namespace {

using namespace std::chrono_literals;

// What a result line answered, keyed by (id or custom_id, completion index): the tokens of a
// native line, the choices' texts of an OpenAI record.
std::map<std::pair<std::string, int>, Json> answers(const std::vector<Json>& lines) {
  std::map<std::pair<std::string, int>, Json> out;
  for (const Json& j : lines) {
    if (j.contains("custom_id")) {
      Json texts = Json::array();
      for (const Json& c : j["response"]["body"]["choices"]) texts.push_back(c["text"]);
      EXPECT_TRUE(out.emplace(std::pair{j["custom_id"].get<std::string>(), 0}, texts).second)
          << "twice: " << j.dump();
    } else {
      EXPECT_TRUE(out.emplace(std::pair{j["id"].get<std::string>(), j["index"].get<int>()},
                              Json{j["token_ids"], j["finish_reason"]})
                      .second)
          << "twice: " << j.dump();
    }
  }
  return out;
}

// Greedy, seeded, seeded only through --seed and the id, n > 1 and an OpenAI record with
// n = 2; hot temperatures, since the tiny model's distribution is peaked.
fs::path mixed_prompts(const std::string& name) {
  std::string text;
  for (int i = 0; i < 6; ++i) {
    std::string id = "r", prompt = "Story number ";  // (not "r" + ...: GCC 12's -Wrestrict)
    id += std::to_string(i);
    prompt += std::to_string(i);
    Json r = {{"id", id},
              {"prompt", prompt},
              {"max_tokens", 4 + i},
              {"temperature", i % 3 == 0 ? 0 : 30}};
    if (i % 3 == 1) r["seed"] = i;  // i % 3 == 2: seeded through --seed and the id
    text += r.dump() + "\n";
  }
  text += Json{{"id", "many"},    {"prompt", "Count"}, {"n", 3},
               {"max_tokens", 6}, {"temperature", 30}, {"seed", 5}}
              .dump() +
          "\n";
  text += Json{{"custom_id", "batch"},
               {"method", "POST"},
               {"url", "/v1/completions"},
               {"body",
                {{"model", "tiny"},
                 {"prompt", "Once"},
                 {"n", 2},
                 {"max_tokens", 5},
                 {"temperature", 30}}}}
              .dump() +
          "\n";
  return write_file(name, text);
}

TEST(LaunchDataParallel, TwoReplicasOfTwoRanksGiveTheSameCompletionsAsOneEngine) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = mixed_prompts("dp-same.jsonl");
  const fs::path one = work_dir() / "dp-same-1.out", four = work_dir() / "dp-same-4.out";
  const Launch a = spawn(prompts, "dp-same-1", {"--seed", "11", "-o", one.string()});
  ASSERT_EQ(finish(a), 0) << run_args(a);
  const Launch b =
      spawn(prompts, "dp-same-4", {"--seed", "11", "--dp", "2", "--tp", "2", "-o", four.string()});
  ASSERT_EQ(finish(b), 0) << run_args(b);
  const auto expected = answers(read_jsonl(one));
  EXPECT_EQ(expected.size(), 6u + 3u + 1u);
  EXPECT_EQ(answers(read_jsonl(four)), expected);
  // One summary for the run, each replica's own in the log, both replicas did work.
  const std::string err = read_text(b.err);
  EXPECT_EQ(count_of(err, "[launcher] [info] done: requests: 8 ok, 0 failed"), 1u) << err;
  for (const char* replica : {"replica 0: done: requests: ", "replica 1: done: requests: "})
    EXPECT_EQ(count_of(err, replica), 1u) << err;
  EXPECT_EQ(err.find("replica 0: done: requests: 0 ok"), std::string::npos) << err;
  EXPECT_EQ(err.find("replica 1: done: requests: 0 ok"), std::string::npos) << err;
}

TEST(LaunchDataParallel, ResultsOnStdoutFromThreeReplicasAreWholeLines) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = mixed_prompts("dp-stdout.jsonl");
  const Launch l = spawn(prompts, "dp-stdout", {"--dp", "3"});
  ASSERT_EQ(finish(l), 0) << run_args(l);
  // spawn() sends stdout to <tag>.stdout; read_jsonl fails on a broken line.
  EXPECT_EQ(answers(read_jsonl(work_dir() / "dp-stdout.stdout")).size(), 10u);
}

TEST(LaunchDataParallel, BadLinesAreAnsweredOnceByTheLauncherAndTheExitCodeSaysSo) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = write_file(
      "dp-bad.jsonl", R"({"id": "ok1", "prompt": "Hi", "max_tokens": 3, "temperature": 0})"
                      "\n"
                      R"({"id": "bad", "prompt": ""})"
                      "\n"
                      R"({"id": "ok2", "prompt": "Yo", "max_tokens": 3, "temperature": 0})"
                      "\n");
  const fs::path out = work_dir() / "dp-bad.out";
  const Launch l = spawn(prompts, "dp-bad", {"--dp", "2", "-o", out.string()});
  EXPECT_EQ(finish(l), 1) << run_args(l);
  const std::vector<Json> lines = read_jsonl(out);
  ASSERT_EQ(lines.size(), 3u);
  std::multiset<std::string> ids;
  for (const Json& j : lines) ids.insert(j["id"].get<std::string>());
  EXPECT_EQ(ids, (std::multiset<std::string>{"bad", "ok1", "ok2"}));
}

TEST(LaunchDataParallel, SigintMidRunThenResumeWritesEveryRequestOnce) {
  REQUIRE_TOKENIZER();
  std::string text;
  for (int i = 0; i < 6; ++i)
    text += Json{{"id", std::string("long").append(std::to_string(i))},
                 {"prompt", "Tell me a long story"},
                 {"max_tokens", 120},
                 {"ignore_eos", true},
                 {"temperature", 0}}
                .dump() +
            "\n";
  const fs::path prompts = write_file("dp-resume.jsonl", text);
  const fs::path out = work_dir() / "dp-resume.out";
  const Launch l =
      spawn(prompts, "dp-resume", {"--dp", "2", "--max-num-seqs", "1", "-o", out.string()});
  ASSERT_TRUE(wait_for_text(out, "\n", 60s)) << run_args(l);
  ASSERT_EQ(::kill(l.pid, SIGINT), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value()) << "launcher still running 10 s after SIGINT";
  EXPECT_EQ(*rc, 130) << run_args(l);
  const std::string err = read_text(l.err);
  const std::regex closing(
      R"(interrupted by SIGINT \(Interrupt\): (\d+) finished results? kept, (\d+) requests? unfinished)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(err, m, closing)) << err;
  const size_t kept = read_jsonl(out).size();
  EXPECT_EQ(std::stoul(m[1]), kept) << err;
  EXPECT_EQ(std::stoul(m[2]), 6 - kept) << err;
  EXPECT_LT(kept, 6u);

  const Launch again = spawn(prompts, "dp-resume-2", {"--dp", "2", "--resume", "-o", out.string()});
  ASSERT_EQ(finish(again), 0) << run_args(again);
  const std::vector<Json> lines = read_jsonl(out);
  EXPECT_EQ(answers(lines).size(), 6u);  // answers() fails on an id written twice
  for (const Json& j : lines) EXPECT_EQ(j["completion_tokens"], 120) << j.dump();
}

TEST(LaunchDataParallel, KillNineOfOneRankOfOneReplicaEndsTheRunNamingBoth) {
  REQUIRE_TOKENIZER();
  const fs::path out = work_dir() / "dp-kill.out";
  const Launch l = spawn(long_prompts("dp-kill.jsonl"), "dp-kill",
                         {"--dp", "2", "--tp", "2", "--max-num-seqs", "1", "-o", out.string()});
  const std::regex started(R"(replica (\d) rank (\d) started \(pid (\d+)\))");
  std::map<std::pair<int, int>, pid_t> pids;
  const auto end = Clock::now() + 60s;
  while (Clock::now() < end &&
         (pids.size() < 4 || read_text(l.err).find("all 2 replicas loaded") == std::string::npos)) {
    const std::string err = read_text(l.err);
    for (std::sregex_iterator it(err.begin(), err.end(), started), e; it != e; ++it)
      pids[{std::stoi((*it)[1]), std::stoi((*it)[2])}] = std::stoi((*it)[3]);
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(pids.size(), 4u) << run_args(l);
  ASSERT_TRUE(wait_for_text(out, "\n", 60s)) << run_args(l);  // a finished line to keep
  const auto t0 = Clock::now();
  const pid_t victim = pids.at({1, 1});
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value()) << "launcher still running 10 s after the kill";
  EXPECT_EQ(*rc, 1);
  std::map<int, pid_t> all;
  for (const auto& [who, pid] : pids) all[who.first * 2 + who.second] = pid;
  all[-1] = l.pid;
  EXPECT_TRUE(all_gone_by(all, l.prefix, t0 + 10s));
  const std::string err = read_text(l.err);
  EXPECT_NE(
      err.find("replica 1 rank 1 (pid " + std::to_string(victim) + ") was killed by signal 9"),
      std::string::npos)
      << err;
  expect_complete_long_prompt_results(out);
  EXPECT_GE(read_jsonl(out).size(), 1u);
  std::printf(
      "kill -9 replica 1 rank 1: launcher exited after %lld ms\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
}

TEST(LaunchDataParallel, ShardsJoinedEqualTheWholeFileAndEachHoldsOnlyItsRequests) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = mixed_prompts("dp-shard.jsonl");
  const fs::path whole = work_dir() / "dp-shard-whole.out";
  const Launch a = spawn(prompts, "dp-shard-whole", {"--seed", "3", "-o", whole.string()});
  ASSERT_EQ(finish(a), 0) << run_args(a);
  std::vector<Json> joined;
  for (int k = 0; k < 3; ++k) {
    const fs::path out = work_dir() / ("dp-shard-" + std::to_string(k) + ".out");
    // Shard 1 also runs two replicas: both splits at once.
    std::vector<std::string> flags = {"--seed", "3",         "--shard", std::to_string(k) + "/3",
                                      "-o",     out.string()};
    if (k == 1) flags.insert(flags.end(), {"--dp", "2"});
    const Launch l = spawn(prompts, "dp-shard-" + std::to_string(k), flags);
    ASSERT_EQ(finish(l), 0) << run_args(l);
    // Requests (non-blank lines) 0..7: r0..r5, many, batch; shard k holds i mod 3 == k.
    std::set<std::string> ids;
    for (const Json& j : read_jsonl(out)) {
      ids.insert(j.contains("custom_id") ? j["custom_id"].get<std::string>()
                                         : j["id"].get<std::string>());
      joined.push_back(j);
    }
    const std::vector<std::set<std::string>> expected = {
        {"r0", "r3", "many"}, {"r1", "r4", "batch"}, {"r2", "r5"}};
    EXPECT_EQ(ids, expected[static_cast<size_t>(k)]) << "shard " << k;
  }
  EXPECT_EQ(answers(joined), answers(read_jsonl(whole)));
}

}  // namespace
}  // namespace nanovllm::testing
