// Splits a Qwen3 chat completion into its reasoning (inside <think>...</think>) and its
// answer, the way vLLM's qwen3 reasoning parser does for a finished, non-streamed output.
//
// The rule (vLLM vllm/reasoning/qwen3_reasoning_parser.py, extract_reasoning):
//   1. If the output contains "<think>", everything up to and including its first
//      occurrence is dropped (older Qwen3 templates let the model open the block itself).
//   2. If the rest contains "</think>": reasoning = text before its first occurrence,
//      content = text after it; an empty content is "none" (null).
//   3. No "</think>" and thinking disabled: no reasoning, content = the whole output.
//   4. No "</think>" and thinking enabled: the output was cut off while thinking, so all
//      of it is reasoning and there is no content.
// Text is returned verbatim (no whitespace trimming), as vLLM does. vLLM's <tool_call>
// implicit end does not apply: we accept no tools.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace nanovllm {

struct ReasoningSplit {
  std::optional<std::string> reasoning_content;  // nullopt = none (JSON null)
  std::optional<std::string> content;            // nullopt = none (JSON null)
};

ReasoningSplit split_reasoning(std::string_view output, bool thinking_enabled);

}  // namespace nanovllm
