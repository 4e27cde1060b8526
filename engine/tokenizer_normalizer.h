// The NFC normalizer of tokenizer.json, through utf8proc. Text made only of code points below
// U+0300 is already NFC (nothing there decomposes or composes with a neighbour), which covers
// ASCII and most European text without a call into utf8proc.
#pragma once

#include <string>
#include <string_view>

namespace nanovllm {

// True when `text` (valid UTF-8) is certainly NFC without looking further.
bool nfc_fast_path(std::string_view text);

// NFC of valid UTF-8 text.
std::string nfc_normalize(std::string_view text);

}  // namespace nanovllm
