#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer_pre_tokenizer.h"

#include <pcre2.h>

#include "engine/tokenizer_error.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

// Unicode White_Space, as members of a character class.
constexpr std::string_view kWhiteSpaceMembers =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

// Per-thread match state: PCRE2 match data and JIT stack are not shareable between threads.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    CHECK(data && context && jit_stack);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

std::string pattern_with_unicode_white_space(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceMembers)
                        : "[" + std::string(kWhiteSpaceMembers) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceMembers) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

RegexSplitter::RegexSplitter(const std::string& pattern) : pattern_(pattern) {
  const std::string rewritten = pattern_with_unicode_white_space(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                        PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code_) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw TokenizerError("pre-tokenizer regex '" + pattern + "' does not compile at offset " +
                         std::to_string(offset) + ": " + reinterpret_cast<char*>(message));
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() {
  if (code_) pcre2_code_free(code_);
}

RegexSplitter::RegexSplitter(RegexSplitter&& other) noexcept
    : pattern_(std::move(other.pattern_)), code_(other.code_), jit_(other.jit_) {
  other.code_ = nullptr;
}

bool RegexSplitter::next_match(std::string_view text, size_t pos, size_t& start,
                               size_t& end) const {
  MatchState& state = match_state();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (pos < text.size()) {
    // The text was validated once up front; NO_UTF_CHECK avoids re-validating per match.
    const int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                          state.data, state.context)
                        : pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK,
                                      state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    CHECK_MSG(rc > 0, "pcre2 match failed with code " << rc);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    if (ov[1] > ov[0]) {
      start = ov[0];
      end = ov[1];
      return true;
    }
    // An empty match carries no word: retry one code point later.
    pos = ov[0] + 1;
    while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
  }
  return false;
}

}  // namespace nanovllm
