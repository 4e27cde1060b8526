#include "engine/reasoning_parser.h"

namespace nanovllm {
namespace {
constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
}  // namespace

ReasoningSplit split_reasoning(std::string_view output, bool thinking_enabled) {
  if (const size_t start = output.find(kThinkStart); start != std::string_view::npos)
    output.remove_prefix(start + kThinkStart.size());

  ReasoningSplit split;
  if (const size_t end = output.find(kThinkEnd); end != std::string_view::npos) {
    split.reasoning_content = std::string(output.substr(0, end));
    const std::string_view content = output.substr(end + kThinkEnd.size());
    if (!content.empty()) split.content = std::string(content);
    return split;
  }
  if (thinking_enabled) {
    split.reasoning_content = std::string(output);
  } else {
    split.content = std::string(output);
  }
  return split;
}

}  // namespace nanovllm
