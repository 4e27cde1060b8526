// --resume: continue a run whose output file already holds some results.
//
// prepare_resume() reads the output file and returns the ids answered without error.
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
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/request.h"

namespace nanovllm {

struct ResumeState {
  std::unordered_set<std::string> done_ids;  // answered without error
  int64_t kept_lines = 0;
  int64_t dropped_error_lines = 0;
  bool truncated_last_line = false;
};

// A missing output file is a fresh start (empty state). Throws std::runtime_error naming
// the file and line for content that is not a result file.
ResumeState prepare_resume(const std::filesystem::path& output);

// The requests still to answer: those whose id is not done. Failed validations are kept
// (they are answered again with their error).
std::vector<Request> pending_requests(std::vector<Request> requests, const ResumeState& state);

}  // namespace nanovllm
