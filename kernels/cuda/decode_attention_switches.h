// The decode attention's comparison switches in the environment, each read once per process
// (kernels/env_choice.h's rule: another value stops the run at its first decode, naming the
// variable). Host code, apart from decode_attention.cu's kernels and launchers.
#pragma once

#include "kernels/attention.h"
#include "kernels/cuda/decode_attention_cluster_plan.h"

namespace nanovllm::kernels::cuda {

// NANOVLLM_DECODE_WALK=pieces|stream|auto: overrides DecodeWalk::kAuto, for whole-run
// comparisons of the split kernel's walks.
DecodeWalk decode_walk_from_env();
// NANOVLLM_DECODE_CLUSTER=off|8|16|auto: the cluster plan's choice (auto when unset).
decode::ClusterChoice decode_cluster_choice();
// NANOVLLM_DECODE_ATTENTION=lanes|mma|auto: whether the lanes kernel is forced in place of the
// tensor-core path (whole-run comparisons, and a way around the new kernel should a shape
// misbehave).
bool decode_lanes_forced();

}  // namespace nanovllm::kernels::cuda
