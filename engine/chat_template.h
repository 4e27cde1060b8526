// Qwen3's chat template (tokenizer_config.json "chat_template"), implemented directly in C++
// for the message kinds the engine accepts: system, user and assistant turns with string
// content. The output equals what transformers' apply_chat_template (and
// @huggingface/jinja) renders for those messages, including the <think> handling of
// earlier assistant turns and the enable_thinking switch.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace nanovllm {

// messages: [{"role": "system"|"user"|"assistant", "content": "..."}, ...], non-empty.
// Throws TokenizerError naming the message index and field for anything else; tool use
// (role "tool", "tool_calls", "tools") and "reasoning_content" are reported as not supported.
std::string render_chat(const nlohmann::json& messages, bool add_generation_prompt,
                        bool enable_thinking = true);

}  // namespace nanovllm
