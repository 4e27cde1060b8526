#include "engine/resume.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>

#include "engine/file_error.h"
#include "engine/result_writer.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

// A result line of either shape names its request by "custom_id" or "id".
bool looks_like_result(const nlohmann::json& j) {
  return j.is_object() && ((j.contains("custom_id") && j["custom_id"].is_string()) ||
                           (j.contains("id") && j["id"].is_string()));
}

// A native line's completion index: its "index", 0 when it has none (lines written before
// n existed). Throws for one that is not a non-negative integer.
int32_t completion_index(const nlohmann::json& j, const std::filesystem::path& output,
                         int64_t number) {
  const auto index = j.find("index");
  if (index == j.end()) return 0;
  if (!index->is_number_integer() || index->get<int64_t>() < 0 || index->get<int64_t>() > INT32_MAX)
    throw std::runtime_error(output.string() + ":" + std::to_string(number) +
                             ": \"index\" is not a completion index, refusing to resume into it");
  return static_cast<int32_t>(index->get<int64_t>());
}

}  // namespace

ResumeState prepare_resume(const std::filesystem::path& output) {
  ResumeState state;
  std::error_code ec;
  if (!std::filesystem::exists(output, ec)) return state;
  std::ifstream in(output, std::ios::binary);
  if (!in) throw file_error("--resume: cannot open the output file", output);

  std::unordered_set<int64_t> dropped;  // line numbers of error results
  int64_t cut_line = 0;                 // the truncated last line, 0 = none
  uint64_t cut_offset = 0;              // its byte offset
  bool missing_newline = false;         // last line parsed but has no '\n'
  std::string line;
  uint64_t offset = 0;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const bool last_without_newline = in.eof();
    const uint64_t start = offset;
    offset += line.size() + (last_without_newline ? 0 : 1);
    if (is_blank(line)) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      if (last_without_newline) {  // the write a crash interrupted
        cut_line = number;
        cut_offset = start;
        break;
      }
      throw std::runtime_error(output.string() + ":" + std::to_string(number) +
                               ": not valid JSON, so not a result file to resume (" + e.what() +
                               ")");
    }
    if (!looks_like_result(j))
      throw std::runtime_error(output.string() + ":" + std::to_string(number) +
                               ": not a result line (no id), refusing to resume into it");
    std::string id;
    if (is_successful_result(j, id)) {
      if (!j.contains("custom_id"))
        state.done_indexes[id].insert(completion_index(j, output, number));
      state.done_ids.insert(id);
      ++state.kept_lines;
    } else {
      dropped.insert(number);
    }
    missing_newline = last_without_newline;
  }
  in.close();
  state.dropped_error_lines = static_cast<int64_t>(dropped.size());
  state.truncated_last_line = cut_line != 0;

  if (!dropped.empty()) {
    // Rewrite without the error lines (and without a truncated tail), then swap it in.
    const auto tmp = std::filesystem::path(output.string() + ".resume.tmp");
    {
      std::ifstream src(output, std::ios::binary);
      std::ofstream dst(tmp, std::ios::binary | std::ios::trunc);
      if (!dst) throw file_error("--resume: cannot write", tmp);
      for (int64_t number = 1; std::getline(src, line); ++number) {
        if (number == cut_line) break;
        if (dropped.contains(number)) continue;
        dst << line << '\n';
      }
      dst.flush();
      if (!dst) throw file_error("--resume: cannot write", tmp);
    }
    std::error_code rename_error;
    std::filesystem::rename(tmp, output, rename_error);
    if (rename_error)
      throw std::runtime_error("--resume: cannot rename " + tmp.string() + " to " +
                               output.string() + ": " + rename_error.message());
  } else if (cut_line != 0) {
    std::filesystem::resize_file(output, cut_offset);
  } else if (missing_newline) {
    std::ofstream(output, std::ios::binary | std::ios::app) << '\n';
  }
  spdlog::info("resume: {} finished results kept, {} error results to retry{}", state.kept_lines,
               state.dropped_error_lines,
               state.truncated_last_line ? ", a truncated last line removed" : "");
  return state;
}

std::vector<int32_t> written_completions(const Request& r, const ResumeState& state) {
  std::vector<int32_t> written;
  if (!r.ok()) return written;
  const int32_t n = std::max(r.sampling_params.n, 1);
  if (r.format != RequestFormat::kNative) {
    if (state.done_ids.contains(r.id))
      for (int32_t i = 0; i < n; ++i) written.push_back(i);
    return written;
  }
  const auto found = state.done_indexes.find(r.id);
  if (found == state.done_indexes.end()) return written;
  for (const int32_t i : found->second)  // ascending (a std::set)
    if (i < n) written.push_back(i);
  return written;
}

std::vector<Request> pending_requests(std::vector<Request> requests, const ResumeState& state) {
  std::erase_if(requests, [&](const Request& r) {
    return r.ok() && static_cast<int32_t>(written_completions(r, state).size()) >=
                         std::max(r.sampling_params.n, 1);
  });
  return requests;
}

std::vector<CompletionRun> completion_runs(const Request& r, std::span<const int32_t> written) {
  CHECK(r.ok());
  if (written.empty()) return {CompletionRun{std::nullopt, r.sampling_params}};
  CHECK(r.sampling_params.seed.has_value());  // the job derives one for every request
  std::vector<CompletionRun> runs;
  for (int32_t index = 0; index < std::max(r.sampling_params.n, 1); ++index) {
    if (std::ranges::binary_search(written, index)) continue;
    CompletionRun run{index, r.sampling_params};
    run.params.n = 1;
    run.params.seed = completion_seed(*r.sampling_params.seed, index);
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace nanovllm
