#include "tests/launcher/launch_test_support.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "ipc/liveness.h"
#include "layers/model_presets.h"
#include "layers/model_writer.h"

namespace nanovllm::testing {

using namespace std::chrono_literals;

fs::path tokenizer_dir() {
  std::string why;
  const std::optional<std::string> json = qwen3_tokenizer_json(&why);
  return json ? fs::path(*json).parent_path() : fs::path();
}

const fs::path& work_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("nanovllm-e2e-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

fs::path preset_model(const std::string& preset, uint64_t seed) {
  // The folder's name is the preset's: results name the served model after it.
  const fs::path d = work_dir() / ("seed-" + std::to_string(seed)) / preset;
  if (!fs::exists(d / "config.json")) {
    ModelWriterOptions options;
    options.preset = preset;
    options.seed = seed;
    options.tokenizer_dir = tokenizer_dir();
    write_model_folder(model_preset(preset), d, options);
  }
  return d;
}

const fs::path& tiny_model() {
  static const fs::path dir = preset_model("tiny", 1);
  return dir;
}

namespace {
class CleanUp : public ::testing::Environment {
 public:
  void TearDown() override { fs::remove_all(work_dir()); }
};
const auto* const kCleanUp = ::testing::AddGlobalTestEnvironment(new CleanUp);
}  // namespace

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

namespace {
// Small limits keep every run to about a second on 2 cores.
std::vector<std::string> common_flags() {
  return {"--device",       "cpu", "--max-model-len", "256", "--max-num-batched-tokens",  "256",
          "--max-num-seqs", "64",  "--block-size",    "16",  "--num-gpu-blocks-override", "96"};
}
}  // namespace

Launch spawn(const fs::path& prompts, const std::string& tag, std::vector<std::string> extra,
             std::string prefix) {
  return spawn_with_model(tiny_model(), prompts, tag, std::move(extra), std::move(prefix));
}

namespace {
// Forks and execs `args` (argv[0] first) with stdout and stderr in the launch's files.
Launch exec_launch(std::vector<std::string> args, const std::string& tag, std::string prefix) {
  Launch l{-1, work_dir() / (tag + ".out.jsonl"), work_dir() / (tag + ".err"), std::move(prefix)};
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int err = ::open(l.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int out =
        ::open((work_dir() / (tag + ".stdout")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::setenv("NANOVLLM_SHM_PREFIX", l.prefix.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  l.pid = pid;
  return l;
}

// NANOVLLM_TEST_LAUNCH_BIN runs the suites against another build (e.g. the one before a fix).
std::string launch_bin() {
  const char* bin = std::getenv("NANOVLLM_TEST_LAUNCH_BIN");
  return bin && *bin ? bin : NANOVLLM_LAUNCH_BIN;
}
}  // namespace

Launch spawn_with_model(const fs::path& model, const fs::path& prompts, const std::string& tag,
                        std::vector<std::string> extra, std::string prefix) {
  std::vector<std::string> args{launch_bin(), model.string(), prompts.string()};
  const std::vector<std::string> common = common_flags();  // "--flag value" pairs
  for (size_t i = 0; i + 1 < common.size(); i += 2)
    if (std::find(extra.begin(), extra.end(), common[i]) == extra.end())  // extra overrides
      args.insert(args.end(), {common[i], common[i + 1]});
  for (auto& f : extra) args.push_back(f);
  return exec_launch(std::move(args), tag, std::move(prefix));
}

Launch spawn_plain(const fs::path& model, const fs::path& prompts, const std::string& tag,
                   const std::vector<std::string>& flags, std::string prefix) {
  std::vector<std::string> args{launch_bin(), model.string(), prompts.string()};
  args.insert(args.end(), flags.begin(), flags.end());
  return exec_launch(std::move(args), tag, std::move(prefix));
}

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

std::string run_args(const Launch& l) {
  return "stderr:\n" + read_text(l.err);
}

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

bool all_gone_by(const std::map<int, pid_t>& pids, const std::string& prefix,
                 Clock::time_point deadline, bool expect_segment_removed) {
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
  std::string text = R"({"id": "short", "prompt": "Hi", "max_tokens": 2, "temperature": 0})"
                     "\n";
  for (int i = 0; i < 4; ++i)
    text +=
        R"({"id": "long)" + std::to_string(i) +
        R"(", "prompt": "Tell me a long story", "max_tokens": 220, "ignore_eos": true, "temperature": 0})"
        "\n";
  return write_file(name, text);
}

bool wait_for_text(const fs::path& p, const std::string& needle, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (read_text(p).find(needle) == std::string::npos) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

void expect_complete_long_prompt_results(const fs::path& out) {
  std::vector<Json> lines;
  ASSERT_NO_THROW(lines = read_jsonl(out)) << read_text(out);  // a partial line does not parse
  for (const Json& line : lines) {
    const size_t wanted = line.value("id", "") == "short" ? 2u : 220u;
    EXPECT_EQ(line.value("finish_reason", ""), "length") << line.dump();
    EXPECT_EQ(line["token_ids"].size(), wanted) << line.dump();
    EXPECT_EQ(line.value("completion_tokens", -1), static_cast<int>(wanted)) << line.dump();
  }
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// ---- --tp 1 and --tp 2 agree ----------------------------------------------------------

}  // namespace nanovllm::testing
