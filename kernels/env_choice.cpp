#include "kernels/env_choice.h"

#include <cstdlib>
#include <sstream>

#include "kernels/check.h"

namespace nanovllm::kernels {

std::string env_choice(const char* name, std::span<const char* const> allowed) {
  const char* v = std::getenv(name);
  if (v == nullptr) return "auto";
  std::ostringstream takes;
  for (const char* a : allowed) {
    if (std::string(v) == a) return v;
    takes << (takes.tellp() > 0 ? ", " : "") << a;
  }
  CHECK_MSG(false, name << " must be one of " << takes.str() << ", not '" << v << "'");
  return "auto";
}

void fail_env_enum_without_auto(const char* name) {
  CHECK_MSG(false, name << ": env_enum lists no \"auto\"");
  std::abort();  // CHECK_MSG(false, ...) has thrown
}

}  // namespace nanovllm::kernels
