// The Split pre-tokenizer of tokenizer.json (behaviour "Isolated"): the regex's matches and
// the gaps between them become the words handed to BPE. Compiled once with PCRE2 (UTF-8,
// Unicode properties) and JIT; each thread keeps its own match data and JIT stack.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace nanovllm {

class RegexSplitter {
 public:
  // Throws TokenizerError quoting the pattern and PCRE2's message when it does not compile.
  explicit RegexSplitter(const std::string& pattern);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&& other) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) = delete;
  RegexSplitter(const RegexSplitter&) = delete;

  // Calls on_word(word) for each word of `text` (valid UTF-8), in order; the words
  // concatenate back to `text`.
  template <typename F>
  void split(std::string_view text, F&& on_word) const {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t start, end;
      if (!next_match(text, pos, start, end)) {
        on_word(text.substr(pos));
        return;
      }
      if (start > pos) on_word(text.substr(pos, start - pos));
      on_word(text.substr(start, end - start));
      pos = end;
    }
  }

  const std::string& pattern() const { return pattern_; }

 private:
  // Finds the next non-empty match at or after pos; false when there is none.
  bool next_match(std::string_view text, size_t pos, size_t& start, size_t& end) const;

  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

// Hugging Face's tokenizers runs these regexes with Oniguruma, where \s means Unicode
// White_Space. PCRE2's \s (with UCP) also takes U+180E MONGOLIAN VOWEL SEPARATOR, which left
// White_Space in Unicode 6.3. This rewrites \s and \S into explicit White_Space classes so both
// engines agree; everything else is passed through unchanged.
std::string pattern_with_unicode_white_space(std::string_view pattern);

}  // namespace nanovllm
