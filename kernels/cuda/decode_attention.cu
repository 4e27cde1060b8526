// Paged decode attention (one query per sequence) with split-KV planned on the device.
//
// A CTA serves one kv head and its G = Hq / Hkv query heads at a time, so each K/V row is read
// from memory once for the whole group. The context is cut into tiles of kTokens tokens (16 KB
// of K+V at D = 128) streamed through a kStages-deep cp.async ring (attend_tiles): while the
// CTA computes tile t, tiles t+1 .. t+kStages-1 are in flight, which keeps enough bytes
// outstanding per SM to run at memory bandwidth without holding K/V in registers. Lane groups
// of D/8 lanes (16 bytes each) own one token row of the tile per step and keep their own online
// softmax (one rescale per tile, not per token); they are merged through shared memory at the
// end of the run of tiles. An fp8 cache (FP8 instantiations) streams its rows and their
// exponents the same way, dequantizing in registers (decode_attention_tile.cuh's Layout).
//
// Who reads which tiles: with scratch (split_out), the tiles of the whole batch are dealt in
// equal contiguous ranges, ceil(tiles / grid) each (equal lengths: every (sequence, kv head) cut
// into the same parts), over a fixed grid (the GPU's resident CTA slots, fewer if the scratch is
// smaller), by a plan every CTA computes from context_lens (decode_attention_plan.cuh); nothing
// depends on host-side lengths, so a captured graph stays right and balanced at every replay. A
// (sequence, kv head) that one CTA covers whole is written directly; one spread over several CTAs
// is merged by log2-sum-exp, by the last of its CTAs to finish when split_counters is given (one
// launch), otherwise by decode_merge_kernel. Without scratch every (sequence, kv head) is one CTA
// (grid (Hkv, B)). Sequences with context_len <= 0 (graph padding rows) get zeros, as the CPU
// reference writes.
//
// A CTA takes its pieces one by one (the ring drained and refilled at each), except on the
// tensor-core path at G <= 2 with enough groups for CTAs to hold several pieces, where one ring
// streams the whole range and the next piece's query comes with it (decode_attention_stream.cuh:
// short pieces cost fp8 about 3.3 us each, bf16 about 0.8; decode_attention_walk.h says when).
//
// Why the last CTA merges rather than a second kernel: at small batches the whole call lasts a
// few microseconds and a second launch (a graph node) costs about as much as the merge; the
// atomic adds one L2 round trip to the last CTA of each split group only. On an H200, in a
// graph, batch 1 at context 1024 takes 7.9 us fused against 9.6 with the merge kernel, batch 16
// 22.6 against 24.8.
#include <algorithm>
#include <climits>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/decode_attention_args.cuh"
#include "kernels/cuda/decode_attention_attend.cuh"
#include "kernels/cuda/decode_attention_cluster.cuh"
#include "kernels/cuda/decode_attention_cluster_plan.h"
#include "kernels/cuda/decode_attention_merge.cuh"
#include "kernels/cuda/decode_attention_mma.cuh"
#include "kernels/cuda/decode_attention_plan.cuh"
#include "kernels/cuda/decode_attention_stream.cuh"
#include "kernels/cuda/decode_attention_switches.h"
#include "kernels/cuda/decode_attention_tile.cuh"
#include "kernels/cuda/decode_attention_walk.h"
#include "kernels/cuda/dispatch.cuh"

namespace nanovllm::kernels::cuda {
namespace {

using decode::context_tiles;
using decode::DecodeArgs;
using decode::kThreads;
using decode::Layout;
using decode::PlanSmem;

// One run of tiles on the compute path the kernel was built for (MMA: tensor cores).
template <int D, int G, int FP8, bool MMA>
__device__ __forceinline__ void attend(const DecodeArgs& a, float4* smem, int b, int hk, int ctx,
                                       int first_tile, int ntiles, int64_t cell, bool& waited) {
  if constexpr (MMA)
    decode::attend_tiles_mma<D, G, FP8>(a, smem, b, hk, ctx, first_tile, ntiles, cell, waited);
  else
    decode::attend_tiles<D, G, FP8>(a, smem, b, hk, ctx, first_tile, ntiles, cell, waited);
}

// Resident CTAs an SM is built for: the lane-group path holds G query heads' accumulators
// per lane (fewer CTAs for larger G); the tensor-core path 64 accumulators whatever G.
template <int G, bool MMA>
constexpr int kMinCtas = MMA ? 4 : (G <= 4 ? 4 : 2);

// No scratch: grid (Hkv, B), one CTA per (sequence, kv head), writing the output.
template <int D, int G, int FP8, bool MMA>
__global__ void __launch_bounds__(kThreads, kMinCtas<G, MMA>)
    decode_whole_kernel(const DecodeArgs a) {
  NANOVLLM_TRACE_SCOPE(trace::kDecodeWhole, a.k_cache);
  decode::wait_then_allow_next();
  __shared__ float4 smem[Layout<D>::kSmemBytes / 16];
  const int hk = blockIdx.x, b = blockIdx.y;
  const int ctx = a.context_lens[b];
  bool waited = true;
  attend<D, G, FP8, MMA>(a, smem, b, hk, ctx, 0, context_tiles<D>(ctx), -1,
                         waited);  // ctx 0: zeros
}

// Small batches: one cluster of C CTAs per (sequence, kv head), grid (C, Hkv, B)
// (decode_attention_cluster.cuh).
template <int D, int G, int FP8, bool MMA, int C>
__global__ void __launch_bounds__(kThreads, kMinCtas<G, MMA>)
    decode_cluster_kernel(const DecodeArgs a) {
  NANOVLLM_TRACE_SCOPE(trace::kDecodeCluster, a.k_cache);
  __shared__ float4 smem[Layout<D>::kSmemBytes / 16];
  decode::attend_in_cluster<D, G, C>(
      a, smem,
      [&](float4* sm, int b, int hk, int ctx, int first, int n, int64_t cell, bool& waited) {
        attend<D, G, FP8, MMA>(a, sm, b, hk, ctx, first, n, cell, waited);
      });
}

// Zeros for the padding rows (context_len <= 0): no unit belongs to them. Rows are dealt
// round-robin over the grid so a batch of mostly padding costs every CTA little.
template <int D>
__device__ void zero_padding_rows(const DecodeArgs& a) {
  for (int b = blockIdx.x; b < a.batch; b += gridDim.x) {
    if (context_tiles<D>(a.context_lens[b]) > 0) continue;
    for (int i = threadIdx.x; i < a.hq * D; i += kThreads)
      a.out[b * a.out_tok + (i / D) * a.out_head + i % D] = to_bf16(0.f);
  }
}

// With scratch: a fixed grid (gridDim.x CTAs), CTA j walks the pieces of its range in order
// (kStream: through one ring, on the tensor-core path at G <= 2 only; bf16's ring takes its
// shared memory dynamically, decode::stream_smem_bytes).
template <int D, int G, bool kFused, int FP8, bool MMA, bool kStream>
__global__ void __launch_bounds__(kThreads, kMinCtas<G, MMA>)
    decode_split_kernel(const DecodeArgs a) {
  NANOVLLM_TRACE_SCOPE(trace::kDecodeSplit, a.k_cache);
  static_assert(!kStream || (MMA && G <= 2));
  using L = Layout<D>;
  constexpr bool kDynamic = kStream && !FP8;
  constexpr int kSmem = kDynamic ? decode::stream_smem_bytes<D, G, FP8>() : L::kSmemBytes;
  // The plan and the first piece's cache tiles go before the wait for the previous kernel
  // (attend_tiles): context_lens, block tables and all but the last cache row of a sequence
  // were written before that kernel started.
  bool waited = false;
  __shared__ float4 static_smem[kDynamic ? 1 : L::kSmemBytes / 16];
  extern __shared__ float4 dynamic_smem[];
  float4* const smem = kDynamic ? dynamic_smem : static_smem;
  // The plan's few words sit at the end of the ring, past the lane-group merge buffers of
  // attend_tiles and merge_group's stage; the ring's tiles overwrite them only after the plan
  // has been read, and ps->flag is written only after a piece's tiles are done.
  static_assert(L::kSmemBytes % 16 == 0 && sizeof(PlanSmem) % 16 == 0);
  static_assert(L::kGroups * G * (D + 2) * 4 + sizeof(PlanSmem) <= L::kSmemBytes);
  static_assert(kThreads * 24 + sizeof(PlanSmem) <= L::kSmemBytes);
  PlanSmem* const ps = reinterpret_cast<PlanSmem*>(smem + (kSmem - sizeof(PlanSmem)) / 16);

  const decode::SeqScan s = decode::scan_units<D>(a, ps);
  const decode::Deal dealt =
      decode::deal_units(s.total, gridDim.x, s.min_tiles, s.max_tiles, decode::kMinQuota);
  // The fp8 kernels read the deal from shared memory after the plan (decode_attention_plan.cuh's
  // Deal says why); their rings stop short of PlanSmem, bf16's run over it.
  static_assert(!FP8 || Layout<D, true>::kStages *
                                    (2 * Layout<D, true>::kTileBytes + Layout<D, true>::kExpBytes) +
                                sizeof(PlanSmem) <=
                            L::kSmemBytes);
  if (FP8 && threadIdx.x == 0) ps->deal = dealt;  // read after locate_unit's barrier
  const decode::Deal& deal = FP8 ? ps->deal : dealt;
  const int64_t j = blockIdx.x;
  if (j < dealt.ctas) {
    const auto [begin, end] = decode::range_of(dealt, j);
    decode::locate_unit<D>(a, s, begin, ps);
    int b = ps->seq, ctx = ps->seq_ctx;
    int64_t seq_first = ps->seq_first_unit;
    __syncthreads();  // the plan is read before the ring overwrites it
    // One ring across the pieces (decode_attention_stream.cuh).
    if constexpr (kStream) {
      decode::attend_range_streamed<D, G, kFused, FP8>(a, smem, ps, deal, j, begin, end, b, ctx,
                                                       seq_first, waited);
    } else {
      // Everything that bounds a loop or a barrier below is CTA-uniform.
      for (int64_t u = begin; u < end;) {
        const int tiles = context_tiles<D>(ctx);  // > 0: sequences without units are skipped
        const int hk = static_cast<int>(u - seq_first) / tiles;  // a sequence's units fit an int
        const int64_t group_begin = seq_first + static_cast<int64_t>(hk) * tiles;
        const int64_t group_end = group_begin + tiles;
        const int64_t piece_end = end < group_end ? end : group_end;
        const int first_tile = static_cast<int>(u - group_begin);
        const int ntiles = static_cast<int>(piece_end - u);
        if (group_begin >= begin && group_end <= end) {
          attend<D, G, FP8, MMA>(a, smem, b, hk, ctx, first_tile, ntiles, -1, waited);
        } else {
          attend<D, G, FP8, MMA>(a, smem, b, hk, ctx, first_tile, ntiles,
                                 decode::partial_cell(deal, j, u), waited);
          if constexpr (kFused)
            decode::merge_if_last<D, G>(a, smem, ps, b, hk, group_begin, group_end, deal);
        }
        __syncthreads();  // smem is free for the next piece
        u = piece_end;
        if (u < end && u == seq_first + static_cast<int64_t>(tiles) * a.hkv) {
          seq_first = u;  // next sequence with units (one exists: u < end <= units)
          do {
            ctx = a.context_lens[++b];
          } while (context_tiles<D>(ctx) == 0);
        }
      }
    }
  }
  decode::wait_once(waited);  // a CTA without tiles still writes padding rows
  zero_padding_rows<D>(a);
}

// Without counters: the same grid as decode_split_kernel; CTA j merges the split group that
// begins in its range and goes on past it, if there is one (a group's first CTA is unique).
template <int D, int G>
__global__ void __launch_bounds__(kThreads) decode_merge_kernel(const DecodeArgs a) {
  NANOVLLM_TRACE_SCOPE(trace::kDecodeMerge, a.k_cache);
  decode::wait_then_allow_next();
  __shared__ float4 stage[kThreads * 24 / 16];  // merge_group's slices
  __shared__ PlanSmem ps;
  const decode::SeqScan s = decode::scan_units<D>(a, &ps);
  const decode::Deal deal =
      decode::deal_units(s.total, gridDim.x, s.min_tiles, s.max_tiles, decode::kMinQuota);
  const int64_t j = blockIdx.x;
  if (j >= deal.ctas) return;
  const auto [begin, end] = decode::range_of(deal, j);
  decode::locate_unit<D>(a, s, end - 1, &ps);
  const int b = ps.seq;
  const int tiles = context_tiles<D>(ps.seq_ctx);
  const int hk = static_cast<int>(end - 1 - ps.seq_first_unit) / tiles;
  const int64_t group_begin = ps.seq_first_unit + static_cast<int64_t>(hk) * tiles;
  const int64_t group_end = group_begin + tiles;
  if (group_begin < begin || group_end <= end) return;
  const int n = static_cast<int>(decode::cta_of(deal, group_end - 1) - j + 1);
  decode::merge_group<D, G>(a, reinterpret_cast<float*>(stage), b, hk, group_begin, j, n, deal);
}

// The dynamic shared memory a split-kernel instantiation launches with: bf16's streamed walk
// only (the others' is static). Its limit (a host-side function attribute, no stream work) is
// raised by the first call, which ctas_per_sm makes before the instantiation's first launch.
template <int D, int G, bool kFused, int FP8, bool MMA, bool kStream>
size_t split_dynamic_smem() {
  if constexpr (!kStream || FP8 != 0) {
    return 0;
  } else {
    constexpr int kBytes = decode::stream_smem_bytes<D, G, FP8>();
    static const bool raised = [] {
      CUDA_CHECK(cudaFuncSetAttribute(decode_split_kernel<D, G, kFused, FP8, MMA, kStream>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
      return true;
    }();
    (void)raised;
    return kBytes;
  }
}

// Resident CTAs per SM of one split-kernel instantiation (asked once; every rank's GPU is the
// same kind).
template <int D, int G, bool kFused, int FP8, bool MMA, bool kStream = false>
int ctas_per_sm() {
  static const int n = [] {
    int v = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &v, decode_split_kernel<D, G, kFused, FP8, MMA, kStream>, kThreads,
        split_dynamic_smem<D, G, kFused, FP8, MMA, kStream>()));
    return std::max(v, 1);
  }();
  return n;
}

// The GQA group sizes dispatch_group builds: Qwen3's 1, 2, 4 and 8, and 5 (Qwen3-14B: 40 q
// heads over 8 kv heads).
bool group_built(int64_t group) {
  return group == 1 || group == 2 || group == 4 || group == 5 || group == 8;
}

// Calls f.template operator()<G>() for a group group_built() takes.
template <class F>
void dispatch_group(int64_t group, F&& f) {
  switch (group) {
    case 1:
      f.template operator()<1>();
      break;
    case 2:
      f.template operator()<2>();
      break;
    case 4:
      f.template operator()<4>();
      break;
    case 5:
      f.template operator()<5>();
      break;
    case 8:
      f.template operator()<8>();
      break;
    default:
      CHECK_MSG(false, "unsupported GQA group " << group << " (supported: 1, 2, 4, 5, 8)");
  }
}

// decode_attention_cluster_plan.h's rule on this device.
decode::ClusterPlan cluster_plan(DecodeMerge merge, int64_t batch, int64_t hkv, int64_t cells) {
  return decode::cluster_plan(merge, decode_cluster_choice(), batch, hkv, cells,
                              multiprocessor_count());
}

// The cluster size a call takes, or 0 for the dealt split: under kAuto only for a context
// bound in (0, cluster_context_bound].
template <int D, int G>
int cluster_size(DecodeMerge merge, int64_t batch, int64_t hkv, int64_t cells,
                 int max_context_len) {
  const decode::ClusterPlan plan = cluster_plan(merge, batch, hkv, cells);
  if (merge == DecodeMerge::kAuto &&
      (max_context_len <= 0 ||
       max_context_len > decode::cluster_context_bound(plan, G, Layout<D>::kTokens)))
    return 0;
  return plan.size;
}

template <int D, int G, int FP8, bool MMA, int C>
void launch_cluster(const DecodeArgs& a, int64_t batch, int64_t hkv, cudaStream_t stream) {
  const auto kernel = decode_cluster_kernel<D, G, FP8, MMA, C>;
  if constexpr (C > 8) {
    static const bool allowed = [&] {  // once per instantiation, before any graph capture
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      return true;
    }();
    (void)allowed;
  }
  cudaLaunchAttribute attrs[2];
  const cudaLaunchConfig_t config = cluster_launch_config(
      dim3(C, static_cast<unsigned>(hkv), static_cast<unsigned>(batch)), dim3(kThreads), C,
      /*early=*/true, stream, attrs);
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, a));
}

template <int D, int G, int FP8, bool MMA>
void launch(const DecodeAttentionParams& p, DecodeArgs a, int64_t batch, int64_t hkv,
            DecodeWalk walk, DecodeMerge merge, cudaStream_t stream) {
  if (p.split_out.data == nullptr) {
    CHECK_LE(batch, 65535);  // gridDim.y
    launch_dependent(decode_whole_kernel<D, G, FP8, MMA>,
                     dim3(static_cast<unsigned>(hkv), static_cast<unsigned>(batch)), dim3(kThreads),
                     stream, a);
    return;
  }
  check_cuda_tensor(p.split_out, DType::kF32, "split_out");
  check_cuda_tensor(p.split_lse, DType::kF32, "split_lse");
  CHECK(p.split_out.is_contiguous() && p.split_lse.is_contiguous());
  CHECK(aligned16(p.split_out.data));  // merge_group reads float4s
  CHECK_EQ(p.split_out.ndim, 3);
  CHECK_EQ(p.split_lse.ndim, 2);
  const int64_t cells = p.split_out.size(0);
  CHECK_EQ(p.split_out.size(1), G);
  CHECK_EQ(p.split_out.size(2), D);
  CHECK_EQ(p.split_lse.size(0), cells);
  CHECK_EQ(p.split_lse.size(1), G);
  CHECK_GE(cells, 2);
  a.split_out = p.split_out.ptr<float>();
  a.split_lse = p.split_lse.ptr<float>();
  const int c = cluster_size<D, G>(merge, batch, hkv, cells, p.max_context_len);
  const bool cluster = c > 0;
  CHECK_MSG(cluster || merge != DecodeMerge::kCluster,
            "decode attention: a batch of " << batch << " over " << hkv
                                            << " kv heads does not fit one cluster wave");
  if (cluster) {
    if (c == 16)
      launch_cluster<D, G, FP8, MMA, 16>(a, batch, hkv, stream);
    else
      launch_cluster<D, G, FP8, MMA, 8>(a, batch, hkv, stream);
    return;
  }
  const bool fused = p.split_counters.data != nullptr;
  if (fused) {
    check_cuda_tensor(p.split_counters, DType::kI32, "split_counters");
    CHECK(p.split_counters.is_contiguous());
    a.split_counters = p.split_counters.ptr<int32_t>();
  }
  // The grid: every resident slot of the kernel launched, within the scratch and counters.
  const int64_t sms = multiprocessor_count();
  const auto grid_of = [&](int per_sm) {
    int64_t ctas = std::min<int64_t>(sms * per_sm, cells / 2);
    if (fused) ctas = std::min(ctas, p.split_counters.numel());
    return static_cast<unsigned>(ctas);
  };
  const auto run = [&]<bool kFused, bool kStream>() {
    const unsigned grid = grid_of(ctas_per_sm<D, G, kFused, FP8, MMA, kStream>());
    cudaLaunchAttribute attrs[2];
    const cudaLaunchConfig_t config = launch_config(
        dim3(grid), dim3(kThreads), split_dynamic_smem<D, G, kFused, FP8, MMA, kStream>(), 0,
        /*early=*/true, stream, attrs);
    CUDA_CHECK(
        cudaLaunchKernelEx(&config, decode_split_kernel<D, G, kFused, FP8, MMA, kStream>, a));
    // Same grid: same plan.
    if constexpr (!kFused)
      launch_dependent(decode_merge_kernel<D, G>, dim3(grid), dim3(kThreads), stream, a);
  };
  if constexpr (MMA && G <= 2) {  // the streamed walk exists
    const DecodeWalk chosen = walk == DecodeWalk::kAuto ? decode_walk_from_env() : walk;
    const int64_t ctas =
        grid_of(fused ? ctas_per_sm<D, G, true, FP8, MMA>() : ctas_per_sm<D, G, false, FP8, MMA>());
    if (decode::streams_range(chosen, batch, hkv, ctas)) {
      if (fused)
        run.template operator()<true, true>();
      else
        run.template operator()<false, true>();
      return;
    }
  }
  if (fused)
    run.template operator()<true, false>();
  else
    run.template operator()<false, false>();
}

// f.template operator()<G>() for the group size, f.template operator()<D>() folded in: both
// template values of a head shape (the switches of DISPATCH_HEAD_DIM and dispatch_group).
template <class F>
void dispatch_shape(int64_t head_dim, int64_t group, F&& f) {
  DISPATCH_HEAD_DIM(head_dim, D,
                    { dispatch_group(group, [&]<int G>() { f.template operator()<D, G>(); }); });
}

}  // namespace

const char* decode_kernel_name(DecodeKernel kernel) {
  return kernel == DecodeKernel::kMma ? "mma" : "lanes";
}

bool mma_decode_supports(int64_t head_dim, int64_t hq, int64_t hkv) {
  if (hkv <= 0 || hq % hkv != 0 || (head_dim != 64 && head_dim != 128) || !group_built(hq / hkv))
    return false;
  bool ok = false;  // the device-side rule, for the built shape
  dispatch_shape(head_dim, hq / hkv,
                 [&]<int D, int G>() { ok = decode::mma_decode_supports<D, G>(); });
  return ok;
}

DecodeKernel decode_attention_kernel(int64_t head_dim, int64_t hq, int64_t hkv) {
  return mma_decode_supports(head_dim, hq, hkv) && !decode_lanes_forced() ? DecodeKernel::kMma
                                                                          : DecodeKernel::kLanes;
}

bool decode_cluster_fits(int64_t batch, int64_t hkv, int64_t cells) {
  return cluster_plan(DecodeMerge::kCluster, batch, hkv, cells).size > 0;
}

int decode_cluster_context_bound(int64_t batch, int64_t hq, int64_t hkv, int64_t head_dim,
                                 int64_t cells) {
  if (hkv <= 0 || hq % hkv != 0 || !group_built(hq / hkv)) return 0;
  int bound = 0;
  dispatch_shape(head_dim, hq / hkv, [&]<int D, int G>() {
    bound = decode::cluster_context_bound(cluster_plan(DecodeMerge::kAuto, batch, hkv, cells), G,
                                          Layout<D>::kTokens);
  });
  return bound;
}

int64_t decode_attention_split_cells(int64_t hq, int64_t hkv, int64_t head_dim) {
  CHECK_GT(hkv, 0);
  CHECK_EQ(hq % hkv, 0);
  int per_sm = 0;
  dispatch_shape(head_dim, hq / hkv, [&]<int D, int G>() {
    // The most of every kernel the call may take: the scratch serves either cache and path.
    const auto cache = [&]<int F>() {
      per_sm = std::max(
          {per_sm, ctas_per_sm<D, G, true, F, false>(), ctas_per_sm<D, G, false, F, false>()});
      if constexpr (decode::mma_decode_supports<D, G>())
        per_sm = std::max(
            {per_sm, ctas_per_sm<D, G, true, F, true>(), ctas_per_sm<D, G, false, F, true>()});
      if constexpr (F != 0 && decode::mma_decode_supports<D, G>() && G <= 2)
        per_sm = std::max({per_sm, ctas_per_sm<D, G, true, F, true, true>(),
                           ctas_per_sm<D, G, false, F, true, true>()});
    };
    cache.template operator()<0>();
    cache.template operator()<kCacheE4m3>();
    cache.template operator()<kCacheInt8>();
  });
  return 2 * static_cast<int64_t>(multiprocessor_count()) * per_sm;
}

void decode_attention(const DecodeAttentionParams& p, DecodeKernel kernel, cudaStream_t stream,
                      DecodeWalk walk, DecodeMerge merge) {
  const DecodeArgs a = decode::make_args(p);
  const int64_t batch = p.q.size(0), hq = p.q.size(1), dim = p.q.size(2);
  const int64_t hkv = p.kv.k_cache.size(2);
  CHECK_MSG(kernel == DecodeKernel::kLanes || mma_decode_supports(dim, hq, hkv),
            "decode attention: the mma kernel takes head dim 128 and up to 8 query heads per kv "
            "head, not head dim "
                << dim << " with " << hq << " / " << hkv);
  if (batch == 0) return;
  const int cache = kv_cache_format(p.kv.k_cache.dtype);
  dispatch_shape(dim, hq / hkv, [&]<int D, int G>() {
    const auto run = [&]<bool kMma>() {
      dispatch_kv_cache(
          cache, [&]<int F>() { launch<D, G, F, kMma>(p, a, batch, hkv, walk, merge, stream); });
    };
    if constexpr (decode::mma_decode_supports<D, G>()) {
      if (kernel == DecodeKernel::kMma) {
        run.template operator()<true>();
        return;
      }
    }
    run.template operator()<false>();
  });
}

void decode_attention(const DecodeAttentionParams& p, cudaStream_t stream) {
  decode_attention(p, decode_attention_kernel(p.q.size(2), p.q.size(1), p.kv.k_cache.size(2)),
                   stream);
}

}  // namespace nanovllm::kernels::cuda
