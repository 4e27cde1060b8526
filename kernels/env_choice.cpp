#include "kernels/env_choice.h"

#include <cstdlib>
#include <sstream>

#include "kernels/check.h"

namespace nanovllm::kernels {

std::string env_choice(const char* name, std::initializer_list<const char*> allowed) {
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

}  // namespace nanovllm::kernels
