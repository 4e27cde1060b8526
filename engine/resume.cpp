#include "engine/resume.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>

#include "engine/file_error.h"
#include "engine/result_writer.h"

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

std::vector<Request> pending_requests(std::vector<Request> requests, const ResumeState& state) {
  std::erase_if(requests,
                [&](const Request& r) { return r.ok() && state.done_ids.contains(r.id); });
  return requests;
}

}  // namespace nanovllm
