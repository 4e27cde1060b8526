// Rule P of kernels/sampler.h on the device (kernels/cuda/sampler.cu is its only user): which
// rows are processed (the processing kernel and the sampler must agree on the buffer holding
// each row), the kernel that writes those rows out of place, and the leader's token_state
// update after the draw.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/sampler.h"
#include "kernels/sampler_math.h"

namespace nanovllm::kernels::cuda::sampling {

// Rule P's per-slot inputs; a null pointer: the batch does not give that group.
struct ProcessParams {
  const float* repetition;  // [N]
  const float* presence;    // [N]
  const float* frequency;   // [N]
  uint16_t* token_state;    // [N, V], rows state_ld apart
  int64_t state_ld;
  const int32_t* bias_count;  // [N]
  const int32_t* bias_ids;    // [N, bias_width], rows bias_ids_ld apart
  const float* bias_values;   // [N, bias_width], rows bias_values_ld apart
  int64_t bias_ids_ld, bias_values_ld;
  int bias_width;
  const int32_t* min_tokens_position;  // [N]
  const int32_t* masked_ids;           // [N, masked_width], rows masked_ld apart
  int64_t masked_ld;
  int masked_width;
};

struct SlotPenalties {
  float repetition, presence, frequency;
  bool active;
};

__device__ __forceinline__ SlotPenalties slot_penalties(const ProcessParams& p, int32_t slot) {
  if (p.repetition == nullptr) return {1.0f, 0.0f, 0.0f, false};
  SlotPenalties s{p.repetition[slot], p.presence[slot], p.frequency[slot], false};
  s.active = penalties_active(s.repetition, s.presence, s.frequency);
  return s;
}
// Bias entries in use (entries past the row's width do not exist).
__device__ __forceinline__ int bias_count(const ProcessParams& p, int32_t slot) {
  return p.bias_count ? min(p.bias_count[slot], p.bias_width) : 0;
}
__device__ __forceinline__ int32_t min_tokens_position(const ProcessParams& p, int32_t slot) {
  return p.min_tokens_position ? p.min_tokens_position[slot] : 0;
}
__device__ __forceinline__ bool row_processed(const ProcessParams& p, int32_t slot,
                                              const SlotPenalties& pen, int32_t position) {
  return row_is_processed(pen.active, bias_count(p, slot), min_tokens_position(p, slot), position);
}

// token_state[s, t] after t was drawn: atomic, since two rows naming one slot may draw the
// same token (both count, as in the CPU reference).
__device__ __forceinline__ void count_sampled_token(uint16_t* state) {
  unsigned short old = *state, seen;
  do {
    seen = old;
    old = atomicCAS(state, seen, static_cast<unsigned short>(token_state_after_sample(seen)));
  } while (old != seen);
}

struct ProcessArgs {
  const float* logits;  // [B, V], rows ld apart
  int64_t ld;
  int vocab;
  const int32_t* slots;      // [B]
  const int32_t* positions;  // [B]
  int num_slots;             // N
  ProcessParams params;
  float* processed;  // [B, V] contiguous
};

constexpr int kProcessThreads = 256;
constexpr int kMaxProcessBlocksPerRow = 16;
constexpr int kProcessBlocksWanted = 256;  // ~2 per SM: small batches spread their rows

// Blocks per row: the fewer rows, the more blocks share one (a processed row is ~1.5 MB of
// traffic at Qwen3's vocabulary, too much for one SM at batch 1).
inline int process_blocks_per_row(int64_t rows) {
  const int64_t per_row = kProcessBlocksWanted / rows;
  if (per_row < 1) return 1;
  return per_row > kMaxProcessBlocksPerRow ? kMaxProcessBlocksPerRow : static_cast<int>(per_row);
}

// Rule P's inputs gathered (null pointers for the groups the batch leaves out); their shapes
// and groups were checked by check_slot_params, their device here.
inline ProcessParams process_params(const SamplingSlotParams& p) {
  ProcessParams q{};
  if (p.repetition_penalty.data != nullptr) {
    check_cuda_tensor(p.repetition_penalty, DType::kF32, "sampler repetition_penalty");
    check_cuda_tensor(p.presence_penalty, DType::kF32, "sampler presence_penalty");
    check_cuda_tensor(p.frequency_penalty, DType::kF32, "sampler frequency_penalty");
    check_cuda_tensor(p.token_state, DType::kU16, "sampler token_state");
    q.repetition = p.repetition_penalty.ptr<float>();
    q.presence = p.presence_penalty.ptr<float>();
    q.frequency = p.frequency_penalty.ptr<float>();
    q.token_state = p.token_state.ptr<uint16_t>();
    q.state_ld = p.token_state.stride[0];
  }
  if (p.logit_bias_count.data != nullptr) {
    check_cuda_tensor(p.logit_bias_count, DType::kI32, "sampler logit_bias_count");
    check_cuda_tensor(p.logit_bias_ids, DType::kI32, "sampler logit_bias_ids");
    check_cuda_tensor(p.logit_bias_values, DType::kF32, "sampler logit_bias_values");
    CHECK_LT(p.logit_bias_ids.size(1), int64_t{1} << 20);
    q.bias_count = p.logit_bias_count.ptr<int32_t>();
    q.bias_ids = p.logit_bias_ids.ptr<int32_t>();
    q.bias_values = p.logit_bias_values.ptr<float>();
    q.bias_ids_ld = p.logit_bias_ids.stride[0];
    q.bias_values_ld = p.logit_bias_values.stride[0];
    q.bias_width = static_cast<int>(p.logit_bias_ids.size(1));
  }
  const TensorView &mp = p.min_tokens_position, &ids = p.min_tokens_masked_ids;
  if (mp.data != nullptr) {
    check_cuda_tensor(mp, DType::kI32, "sampler min_tokens_position");
    check_cuda_tensor(ids, DType::kI32, "sampler min_tokens_masked_ids");
    CHECK_LT(ids.size(1), int64_t{1} << 20);
    q.min_tokens_position = mp.ptr<int32_t>();
    q.masked_ids = ids.ptr<int32_t>();
    q.masked_ld = ids.stride[0];
    q.masked_width = static_cast<int>(ids.size(1));
  }
  return q;
}

inline bool any_processing(const ProcessParams& q) {
  return q.repetition || q.bias_count || q.min_tokens_position;
}

constexpr int kProcessUnroll = 4;  // float4 loads per thread in flight before any store

// out[v] = penalized_logit(x[v], state[v], ...) over [begin, end) (a plain copy when the slot's
// penalties are off: its state is never read). Each step loads all its groups before it
// stores (out may alias x as far as the compiler knows, so it would not hoist the loads).
// Coherent loads only (launched dependent).
template <bool kPenalized>
__device__ __forceinline__ void process_dense(const float* x, const uint16_t* state, float* out,
                                              int begin, int end, const SlotPenalties& pen) {
  const auto one = [&](float xv, uint32_t st) {
    return kPenalized ? penalized_logit(xv, st, pen.repetition, pen.presence, pen.frequency) : xv;
  };
  int v = begin;
  const bool vec = (reinterpret_cast<uintptr_t>(x) & 15) == 0 &&
                   (reinterpret_cast<uintptr_t>(out) & 15) == 0 && (begin & 3) == 0 &&
                   (!kPenalized || (reinterpret_cast<uintptr_t>(state) & 7) == 0);
  if (vec) {
    const int first = begin >> 2, last = end >> 2;
    const int tid = static_cast<int>(threadIdx.x);
    for (int base = first; base < last; base += kProcessThreads * kProcessUnroll) {
      float4 xv[kProcessUnroll] = {};
      ushort4 st[kProcessUnroll] = {};
#pragma unroll
      for (int u = 0; u < kProcessUnroll; ++u) {
        const int g = base + u * kProcessThreads + tid;
        if (g >= last) continue;
        xv[u] = __ldcg(reinterpret_cast<const float4*>(x) + g);
        if constexpr (kPenalized) st[u] = __ldcg(reinterpret_cast<const ushort4*>(state) + g);
      }
#pragma unroll
      for (int u = 0; u < kProcessUnroll; ++u) {
        const int g = base + u * kProcessThreads + tid;
        if (g >= last) continue;
        if constexpr (kPenalized)
          xv[u] = make_float4(one(xv[u].x, st[u].x), one(xv[u].y, st[u].y), one(xv[u].z, st[u].z),
                              one(xv[u].w, st[u].w));
        reinterpret_cast<float4*>(out)[g] = xv[u];
      }
    }
    v = 4 * last;
  }
  for (int i = v + static_cast<int>(threadIdx.x); i < end; i += kProcessThreads)
    out[i] = one(__ldcg(x + i), kPenalized ? __ldcg(state + i) : 0u);
}

// Rule P, out of place: blockIdx.y is the row, blockIdx.x its share of the vocabulary. A row
// that is not processed (padding, or a slot with no penalties, bias or active mask: most rows
// of most steps) reads its slot's few parameters and leaves. A processed share: the dense
// pass, then the bias entries recomputed from the raw logit (bias before the penalties), then
// the min_tokens ids at -inf; each phase after the block's barrier, so the later write wins.
// Launched as a dependent grid (common.cuh): every access follows the wait, and no load goes
// through the non-coherent path. sample_kernel is launched plainly after it, so it starts
// once these writes are complete and visible.
static __global__ void __launch_bounds__(kProcessThreads) process_logits_kernel(ProcessArgs a) {
  NANOVLLM_TRACE_SCOPE(trace::kProcessLogits, nullptr);
  wait_for_previous_grid();
  const int row = static_cast<int>(blockIdx.y);
  const int32_t slot = a.slots[row];
  if (slot < 0 || slot >= a.num_slots) return;  // padding; sample_kernel traps on the other
  const int32_t position = a.positions[row];
  const SlotPenalties pen = slot_penalties(a.params, slot);
  if (!row_processed(a.params, slot, pen, position)) return;
  const int shares = static_cast<int>(gridDim.x);
  const int chunk = (((a.vocab + shares - 1) / shares) + 3) & ~3;
  const int begin = min(a.vocab, static_cast<int>(blockIdx.x) * chunk);
  const int end = min(a.vocab, begin + chunk);
  if (begin >= end) return;
  const float* x = a.logits + row * a.ld;
  float* out = a.processed + static_cast<int64_t>(row) * a.vocab;
  const ProcessParams& p = a.params;
  const uint16_t* state = pen.active ? p.token_state + slot * p.state_ld : nullptr;
  if (pen.active)
    process_dense<true>(x, state, out, begin, end, pen);
  else
    process_dense<false>(x, state, out, begin, end, pen);
  __syncthreads();
  const int bias = bias_count(p, slot);
  for (int j = static_cast<int>(threadIdx.x); j < bias; j += kProcessThreads) {
    const int32_t id = p.bias_ids[slot * p.bias_ids_ld + j];
    if (id < begin || id >= end) continue;  // another share's (or outside the vocabulary)
    const uint32_t st = pen.active ? state[id] : 0u;
    out[id] = penalized_logit(x[id] + p.bias_values[slot * p.bias_values_ld + j], st,
                              pen.repetition, pen.presence, pen.frequency);
  }
  if (!(position + 1 < min_tokens_position(p, slot))) return;
  __syncthreads();
  const int32_t* ids = p.masked_ids + slot * p.masked_ld;
  for (int j = static_cast<int>(threadIdx.x); j < p.masked_width; j += kProcessThreads) {
    const int32_t id = ids[j];
    if (id >= begin && id < end) out[id] = -INFINITY;  // -1 pads the row
  }
}

}  // namespace nanovllm::kernels::cuda::sampling
