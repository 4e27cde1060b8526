#include "kernels/cuda/decode_attention_switches.h"

#include <string>

#include "kernels/env_choice.h"

namespace nanovllm::kernels::cuda {

DecodeWalk decode_walk_from_env() {
  static const DecodeWalk walk =
      env_enum("NANOVLLM_DECODE_WALK", {std::pair{"pieces", DecodeWalk::kPieces},
                                        {"stream", DecodeWalk::kStream},
                                        {"auto", DecodeWalk::kAuto}});
  return walk;
}

decode::ClusterChoice decode_cluster_choice() {
  using decode::ClusterChoice;
  static const ClusterChoice c =
      env_enum("NANOVLLM_DECODE_CLUSTER", {std::pair{"off", ClusterChoice::kOff},
                                           {"8", ClusterChoice::kForce8},
                                           {"16", ClusterChoice::kForce16},
                                           {"auto", ClusterChoice::kAuto}});
  return c;
}

bool decode_lanes_forced() {
  static const bool forced =
      env_choice("NANOVLLM_DECODE_ATTENTION", {"lanes", "mma", "auto"}) == "lanes";
  return forced;
}

}  // namespace nanovllm::kernels::cuda
