// The comparison switches a kernel family reads from the environment once per process
// (NANOVLLM_DECODE_ATTENTION, NANOVLLM_DECODE_WALK, NANOVLLM_PREFILL_ATTENTION,
// NANOVLLM_DECODE_GEMM, NANOVLLM_FUSED_MLP, NANOVLLM_FUSED_OUT_PROJ, NANOVLLM_SKINNY_NEXT_LAUNCH,
// NANOVLLM_QKV_ROPE, NANOVLLM_ROPE_EARLY_NEXT, NANOVLLM_LIBRARY_NEXT_LAUNCH; README lists them):
// one rule for all of them, so a mistyped value always stops the run naming the variable.
#pragma once

#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace nanovllm::kernels {

// The value of environment variable `name`: "auto" when unset, else one of `allowed` ("auto"
// among them). Any other value fails a CHECK naming the variable, its value and the values it
// takes.
std::string env_choice(const char* name, std::span<const char* const> allowed);
inline std::string env_choice(const char* name, std::initializer_list<const char*> allowed) {
  return env_choice(name, std::span<const char* const>(allowed.begin(), allowed.size()));
}

// Fails a CHECK: `name`'s env_enum call lists no "auto" (our own invariant, not user input).
[[noreturn]] void fail_env_enum_without_auto(const char* name);

// A switch that picks one of several modes: env_choice over the names of `values`, as the value
// paired with the one set. "auto" must be among them (an unset variable answers it; without it
// that call fails a CHECK).
template <typename E>
E env_enum(const char* name, std::initializer_list<std::pair<const char*, E>> values) {
  std::vector<const char*> names;
  for (const auto& entry : values) names.push_back(entry.first);
  const std::string v = env_choice(name, names);
  for (const auto& entry : values)
    if (v == entry.first) return entry.second;
  fail_env_enum_without_auto(name);
}

}  // namespace nanovllm::kernels
