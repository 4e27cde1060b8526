#include "layers/knock_out.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "kernels/check.h"

namespace nanovllm {
namespace {

constexpr std::pair<const char*, LayerOp> kNames[] = {
    {"qkv_proj", LayerOp::kQkvProj}, {"rope", LayerOp::kRope}, {"attention", LayerOp::kAttention},
    {"o_proj", LayerOp::kOProj},     {"norm", LayerOp::kNorm}, {"gate_up", LayerOp::kGateUp},
    {"down", LayerOp::kDown},
};

std::string names_taken() {
  std::string all;
  for (const auto& [name, op] : kNames) all += (all.empty() ? "" : ", ") + std::string(name);
  return all;
}

uint32_t knock_out_mask() {
  static const uint32_t mask = [] {
    const char* env = std::getenv("NANOVLLM_KNOCK_OUT");
    uint32_t m = 0;
    try {
      m = parse_knock_out(env != nullptr ? env : "");
    } catch (const std::invalid_argument& e) {
      CHECK_MSG(false, "NANOVLLM_KNOCK_OUT: " << e.what());
    }
    if (m != 0)
      spdlog::warn(
          "NANOVLLM_KNOCK_OUT={}: those operations are left out of every decoder layer; a "
          "timing experiment, its outputs are wrong",
          env);
    return m;
  }();
  return mask;
}

}  // namespace

uint32_t parse_knock_out(const std::string& list) {
  uint32_t mask = 0;
  if (list.empty()) return mask;
  size_t begin = 0;
  while (true) {
    const size_t end = list.find(',', begin);
    const std::string entry =
        list.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    bool found = false;
    for (const auto& [name, op] : kNames)
      if (entry == name) {
        mask |= static_cast<uint32_t>(op);
        found = true;
      }
    if (!found)
      throw std::invalid_argument("unknown operation '" + entry + "' (takes " + names_taken() +
                                  ")");
    if (end == std::string::npos) return mask;
    begin = end + 1;
  }
}

bool knocked_out(LayerOp op) {
  return (knock_out_mask() & static_cast<uint32_t>(op)) != 0;
}

}  // namespace nanovllm
