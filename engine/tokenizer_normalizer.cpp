#include "engine/tokenizer_normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "kernels/check.h"

namespace nanovllm {

bool nfc_fast_path(std::string_view text) {
  // U+0300 is encoded as CC 80; every lead byte below 0xCC starts a code point below it.
  for (const char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) return false;
  }
  return true;
}

std::string nfc_normalize(std::string_view text) {
  if (nfc_fast_path(text)) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  // The input was validated as UTF-8 before, so a failure here is a bug (or out of memory).
  CHECK_MSG(n >= 0, "utf8proc_map failed: " << utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace nanovllm
