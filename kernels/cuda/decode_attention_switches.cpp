#include "kernels/cuda/decode_attention_switches.h"

#include <string>

#include "kernels/env_choice.h"

namespace nanovllm::kernels::cuda {

DecodeWalk decode_walk_from_env() {
  static const DecodeWalk walk = [] {
    const std::string v = env_choice("NANOVLLM_DECODE_WALK", {"pieces", "stream", "auto"});
    return v == "pieces"   ? DecodeWalk::kPieces
           : v == "stream" ? DecodeWalk::kStream
                           : DecodeWalk::kAuto;
  }();
  return walk;
}

decode::ClusterChoice decode_cluster_choice() {
  static const decode::ClusterChoice c = [] {
    const std::string v = env_choice("NANOVLLM_DECODE_CLUSTER", {"off", "8", "16", "auto"});
    return v == "off"  ? decode::ClusterChoice::kOff
           : v == "8"  ? decode::ClusterChoice::kForce8
           : v == "16" ? decode::ClusterChoice::kForce16
                       : decode::ClusterChoice::kAuto;
  }();
  return c;
}

bool decode_lanes_forced() {
  static const bool forced =
      env_choice("NANOVLLM_DECODE_ATTENTION", {"lanes", "mma", "auto"}) == "lanes";
  return forced;
}

}  // namespace nanovllm::kernels::cuda
