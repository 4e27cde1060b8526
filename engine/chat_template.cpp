#include "engine/chat_template.h"

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "engine/tokenizer_error.h"

namespace nanovllm {
namespace {

struct Message {
  std::string_view role;
  std::string_view content;
};

[[noreturn]] void fail(size_t index, const std::string& what) {
  throw TokenizerError("messages[" + std::to_string(index) + "]: " + what);
}

// Python's str.lstrip('\n'), rstrip('\n') and strip('\n').
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view strip_newlines(std::string_view s) {
  return rstrip_newlines(lstrip_newlines(s));
}

// s.split(sep)[-1] and s.split(sep)[0].
std::string_view after_last(std::string_view s, std::string_view sep) {
  const size_t at = s.rfind(sep);
  return at == std::string_view::npos ? s : s.substr(at + sep.size());
}
std::string_view before_first(std::string_view s, std::string_view sep) {
  return s.substr(0, s.find(sep));
}

std::vector<Message> validate(const nlohmann::json& messages) {
  if (!messages.is_array()) throw TokenizerError("messages: expected an array of messages");
  if (messages.empty()) throw TokenizerError("messages: must hold at least one message");
  std::vector<Message> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& m = messages[i];
    if (!m.is_object()) fail(i, "expected an object with \"role\" and \"content\"");
    for (const char* key : {"tool_calls", "reasoning_content", "tools", "tool_call_id"}) {
      if (m.contains(key) && !m[key].is_null()) {
        fail(i, std::string("field \"") + key +
                    "\" is not supported (no tool use or reasoning_content)");
      }
    }
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string()) fail(i, "field \"role\" must be a string");
    const auto& r = role->get_ref<const std::string&>();
    if (r == "tool") fail(i, "role \"tool\" is not supported (no tool use)");
    if (r != "system" && r != "user" && r != "assistant") {
      fail(i, "role \"" + r + "\" is not one of system, user, assistant");
    }
    const auto content = m.find("content");
    if (content == m.end() || !content->is_string()) fail(i, "field \"content\" must be a string");
    out.push_back({r, content->get_ref<const std::string&>()});
  }
  return out;
}

}  // namespace

std::string render_chat(const nlohmann::json& messages, bool add_generation_prompt,
                        bool enable_thinking) {
  const std::vector<Message> msgs = validate(messages);
  const size_t n = msgs.size();
  std::string out;
  if (msgs[0].role == "system") {
    out.append("<|im_start|>system\n").append(msgs[0].content).append("<|im_end|>\n");
  }
  // The last user turn that is a real query (not a wrapped tool response): assistant turns
  // after it keep their reasoning, earlier ones are shown without it.
  size_t last_query_index = n - 1;
  for (size_t k = n; k-- > 0;) {
    const std::string_view c = msgs[k].content;
    if (msgs[k].role == "user" &&
        !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) {
      last_query_index = k;
      break;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const Message& m = msgs[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      out.append("<|im_start|>")
          .append(m.role)
          .append("\n")
          .append(m.content)
          .append("<|im_end|>\n");
    } else if (m.role == "assistant") {
      std::string_view content = m.content;
      std::string_view reasoning;
      if (m.content.find("</think>") != std::string_view::npos) {
        content = lstrip_newlines(after_last(m.content, "</think>"));
        reasoning = lstrip_newlines(
            after_last(rstrip_newlines(before_first(m.content, "</think>")), "<think>"));
      }
      out.append("<|im_start|>assistant\n");
      if (i > last_query_index && (i == n - 1 || !reasoning.empty())) {
        out.append("<think>\n").append(strip_newlines(reasoning)).append("\n</think>\n\n");
        out.append(lstrip_newlines(content));
      } else {
        out.append(content);
      }
      out.append("<|im_end|>\n");
    }
  }
  if (add_generation_prompt) {
    out.append("<|im_start|>assistant\n");
    if (!enable_thinking) out.append("<think>\n\n</think>\n\n");
  }
  return out;
}

}  // namespace nanovllm
