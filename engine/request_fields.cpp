#include "engine/request_fields.h"

#include <utf8proc.h>

#include <algorithm>
#include <limits>
#include <numeric>

namespace nanovllm {

std::string join_field(std::string_view prefix, std::string_view key) {
  if (prefix.empty()) return std::string(key);
  return std::string(prefix) + "." + std::string(key);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);  // [|b| + 1] distances for the previous prefix of a
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string_view> closest_field(std::string_view key,
                                              std::span<const std::string_view> known) {
  std::optional<std::string_view> best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (std::string_view k : known) {
    const size_t d = edit_distance(key, k);
    if (d < best_distance) best_distance = d, best = k;
  }
  // A typo changes a few characters; anything further is a different word.
  const size_t limit = std::max<size_t>(2, std::min(key.size(), best ? best->size() : 0) / 3);
  if (best && best_distance <= limit) return best;
  return std::nullopt;
}

std::optional<FieldProblem> check_known_fields(const nlohmann::json& object,
                                               std::span<const std::string_view> known,
                                               std::string_view prefix,
                                               std::span<const std::string_view> also_accepted) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    if (std::find(also_accepted.begin(), also_accepted.end(), key) != also_accepted.end()) continue;
    std::string message = "unknown field '" + key + "'";
    if (auto guess = closest_field(key, known)) {
      message += " (did you mean '" + std::string(*guess) + "'?)";
    } else {
      message += " (known fields:";
      for (std::string_view k : known) message.append(" ").append(k);
      message += ")";
    }
    return FieldProblem{join_field(prefix, key), message};
  }
  return std::nullopt;
}

std::optional<size_t> invalid_utf8_offset(std::string_view text) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {  // ASCII fast path
      ++pos;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n =
        utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
    if (n <= 0 || cp < 0) return pos;
    pos += static_cast<size_t>(n);
  }
  return std::nullopt;
}

std::string json_path_at(std::string_view text, size_t offset) {
  // One frame per open container: its current key (object) or element index (array).
  struct Frame {
    bool object;
    std::string key;
    size_t index = 0;
    bool expecting_key = true;
  };
  std::vector<Frame> stack;
  auto path = [&stack] {
    std::string p;
    for (const Frame& f : stack) {
      if (f.object) {
        p = join_field(p, f.key);
      } else {
        // append() rather than "[" + ...: GCC 12 -O3 raises a false -Wrestrict on that.
        p.append("[").append(std::to_string(f.index)).append("]");
      }
    }
    return p;
  };
  for (size_t i = 0; i < text.size() && i <= offset; ++i) {
    const char c = text[i];
    if (c == '"') {
      const size_t start = i + 1;
      size_t end = start;
      while (end < text.size() && text[end] != '"') end += (text[end] == '\\') ? 2 : 1;
      const bool is_key = !stack.empty() && stack.back().object && stack.back().expecting_key;
      // Inside a key, the path is that of the object holding it.
      if (offset < end || end >= text.size()) return path();
      if (is_key) {
        stack.back().key = std::string(text.substr(start, end - start));
        stack.back().expecting_key = false;
      }
      i = end;
    } else if (c == '{' || c == '[') {
      stack.push_back(Frame{c == '{', "", 0, true});
    } else if ((c == '}' || c == ']') && !stack.empty()) {
      stack.pop_back();
    } else if (c == ',' && !stack.empty()) {
      if (stack.back().object) {
        stack.back().expecting_key = true;
      } else {
        ++stack.back().index;
      }
    }
  }
  return "";
}

std::optional<FieldProblem> read_nonempty_string(const nlohmann::json& v, std::string field,
                                                 std::string& out) {
  if (!v.is_string()) return FieldProblem{std::move(field), "must be a string"};
  if (v.get_ref<const std::string&>().empty()) return FieldProblem{std::move(field), "is empty"};
  out = v.get<std::string>();
  return std::nullopt;
}

std::optional<FieldProblem> read_token_ids(const nlohmann::json& v, std::string field,
                                           std::vector<int32_t>& out) {
  if (!v.is_array()) return FieldProblem{std::move(field), "must be an array of token ids"};
  if (v.empty()) return FieldProblem{std::move(field), "is empty"};
  out.clear();
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& t = v[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!t.is_number_integer()) return FieldProblem{at, "must be an integer token id"};
    const bool fits =
        t.is_number_unsigned()
            ? t.get<uint64_t>() <= uint64_t{std::numeric_limits<int32_t>::max()}
            : t.get<int64_t>() >= 0 && t.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!fits) return FieldProblem{at, "token id " + t.dump() + " is outside the vocabulary"};
    out.push_back(t.get<int32_t>());
  }
  return std::nullopt;
}

std::optional<FieldProblem> read_messages(const nlohmann::json& v, std::string field,
                                          nlohmann::json& out) {
  static constexpr std::string_view kMessageFields[] = {"role", "content"};
  static constexpr std::string_view kRoles[] = {"system", "user", "assistant"};
  if (!v.is_array()) return FieldProblem{std::move(field), "must be an array of messages"};
  if (v.empty()) return FieldProblem{std::move(field), "is empty"};
  out = nlohmann::json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    const auto& m = v[i];
    if (!m.is_object()) return FieldProblem{at, "must be an object with role and content"};
    if (m.contains("tool_calls") || m.contains("reasoning_content"))
      return FieldProblem{at + (m.contains("tool_calls") ? ".tool_calls" : ".reasoning_content"),
                          "is not supported"};
    if (auto p = check_known_fields(m, kMessageFields, at)) return p;
    if (!m.contains("role")) return FieldProblem{at + ".role", "is missing"};
    if (!m.contains("content")) return FieldProblem{at + ".content", "is missing"};
    const auto& role = m["role"];
    if (!role.is_string() || std::find(std::begin(kRoles), std::end(kRoles),
                                       role.get<std::string>()) == std::end(kRoles))
      return FieldProblem{at + ".role", "must be \"system\", \"user\" or \"assistant\""};
    const auto& content = m["content"];
    std::string text;
    if (content.is_string()) {
      text = content.get<std::string>();
    } else if (content.is_array()) {
      for (size_t j = 0; j < content.size(); ++j) {
        const auto& part = content[j];
        const std::string part_at = at + ".content[" + std::to_string(j) + "]";
        if (!part.is_object() || part.value("type", nlohmann::json()) != "text" ||
            !part.contains("text") || !part["text"].is_string())
          return FieldProblem{part_at,
                              "only {\"type\": \"text\", \"text\": ...} parts are supported"};
        if (j > 0) text += "\n";
        text += part["text"].get<std::string>();
      }
    } else {
      return FieldProblem{at + ".content", "must be a string or an array of text parts"};
    }
    out.push_back({{"role", role}, {"content", std::move(text)}});
  }
  return std::nullopt;
}

}  // namespace nanovllm
