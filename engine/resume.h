// --resume: continue a run whose output file already holds some results.
//
// prepare_resume() reads the output file and returns the ids answered without error and,
// for native lines, which completion indexes each id has (a request with n > 1 writes one
// line per completion, so a crash can leave some of them written: only the missing ones run
// again, see written_completions()). An OpenAI record is written once all n completions are
// in, so it answers its request whole.
// It repairs the file so that appending keeps it valid JSONL:
//   - a last line without its newline that does not parse (a crash mid-write) is cut off;
//     one that parses gets its newline;
//   - error results are removed, since those requests are retried and answered again
//     (the file is rewritten through a temporary file and a rename, so a crash during
//     the repair leaves either the old or the new file, never a mix).
// Any other line that is not valid JSON means the file is not ours: a clear error, and
// the file is left untouched.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/request.h"
#include "engine/sampling_params.h"

namespace nanovllm {

struct ResumeState {
  std::unordered_set<std::string> done_ids;  // with a line answered without error (any shape)
  // Native lines answered without error: id -> their "index"es (0 for a line without one).
  std::unordered_map<std::string, std::set<int32_t>> done_indexes;
  int64_t kept_lines = 0;
  int64_t dropped_error_lines = 0;
  bool truncated_last_line = false;
};

// A missing output file is a fresh start (empty state). Throws std::runtime_error naming
// the file and line for content that is not a result file.
ResumeState prepare_resume(const std::filesystem::path& output);

// The completion indexes of `request` already in the output file, ascending, in
// [0, sampling_params.n): a native request's answered indexes; an OpenAI request's all or
// none. Empty for a request that failed validation (it is answered again).
std::vector<int32_t> written_completions(const Request& request, const ResumeState& state);

// The requests still to answer: those with a completion not yet written (a native n > 1
// request with some of its completions written stays: written_completions() says which to
// leave out). Failed validations are kept (they are answered again with their error).
std::vector<Request> pending_requests(std::vector<Request> requests, const ResumeState& state);

// One engine request that answers (part of) a Request.
struct CompletionRun {
  std::optional<int32_t> index;  // set: completion `index` alone; unset: all n of them
  SamplingParams params;         // what to pass add_request
};

// How to run a valid request (its seed resolved) with the completion indexes `written`
// (ascending) already in the output: none written, one run of all n; else one run per
// missing index, with n = 1 and seed completion_seed(seed, index). The sampler's draws
// depend only on (seed, position, token), so such a run gives the tokens completion `index`
// of the whole request would have, only the missing completions are generated, and none is
// written twice.
std::vector<CompletionRun> completion_runs(const Request& request,
                                           std::span<const int32_t> written);

}  // namespace nanovllm
