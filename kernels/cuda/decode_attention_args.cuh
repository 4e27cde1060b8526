// The host side of the decode attention's launch (decode_attention_args.cu): the checks of a
// call's tensors and the kernel arguments (DecodeArgs) built from them. Internal to
// decode_attention.cu.
#pragma once

#include "kernels/attention.h"
#include "kernels/cuda/decode_attention_tile.cuh"

namespace nanovllm::kernels::cuda::decode {

// Checks p (CHECK fails on a bad tensor) and returns its kernel arguments.
DecodeArgs make_args(const DecodeAttentionParams& p);

}  // namespace nanovllm::kernels::cuda::decode
