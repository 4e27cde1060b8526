// Prefill attention for Hopper (sm_90a), head dim 128: the FlashAttention-3 design on our paged
// cache. One CTA serves kBlockM = 128 query rows of one kv head: the G = Hq / Hkv q heads of the
// group times P = 128 / G query positions, so each K/V tile read serves every q head of its group
// (GQA packing). Three warpgroups:
//   producer  (warpgroup 0, one thread): TMA loads of the Q tile once, then K and V tiles of
//             kBlockN = 128 keys gathered through the block table, into a ring of
//             128-byte-swizzled shared-memory tiles; full/empty mbarriers hand them over;
//   consumers (warpgroups 1 and 2, 64 rows each): S = Q K^T with wgmma from shared memory,
//             the online softmax in registers (f32, log2 domain), O += P V with wgmma taking P
//             from registers (rounded to bf16, as FlashAttention does) and V transposed from
//             shared memory.
// The producer gives its registers to the consumers (setmaxnreg). Causal tiles past the last
// query's diagonal are never loaded; within a (sequence, kv head) the heavier (later) query tiles
// start first (measured on an H200: 1-2 % faster on causal 8k-32k than dealing the heaviest
// tiles of all heads first, which shares less of each head's K/V in L2).
#include <numeric>

#include "kernels/attention.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/paged_attention_args.cuh"
#include "kernels/cuda/prefill_attention_kernels.h"
#include "kernels/cuda/prefill_hopper_consumer.cuh"
#include "kernels/cuda/sm90_device.h"
#include "kernels/cuda/tensor_map.h"

namespace nanovllm::kernels::cuda {
namespace hopper_prefill {
namespace {

// One K or V tile of keys [n0, n0 + kBlockN): boxes of rows_per_load keys, each inside one
// cache block. Keys past k_len load block row 0 (any finite or not: S is masked there and the
// consumers zero those V rows before P V).
__device__ __forceinline__ void load_kv_tile(unsigned char* dst, const CUtensorMap* map,
                                             uint64_t* bar, const int32_t* block_table, int n0,
                                             int k_len, int hk, const HopperArgs& a) {
  for (int r = 0; r < kBlockN; r += a.rows_per_load) {
    const int j = n0 + r;
    const int row = j < k_len ? block_table[j / a.block_size] * a.block_size + j % a.block_size : 0;
    tma_load_3d(dst + r * kRowBytes, map, bar, 0, hk, row);
    tma_load_3d(dst + kHalfBytes + r * kRowBytes, map, bar, 64, hk, row);
  }
}

__device__ __forceinline__ void produce(const CUtensorMap* tm_q, const CUtensorMap* tm_k,
                                        const CUtensorMap* tm_v, unsigned char* smem,
                                        const Barriers& bars, const HopperArgs& a,
                                        const CtaWork& w) {
  const int hk = w.hk, k_len = w.k_len;
  const int positions = a.positions;
  // G x P rows of Q: all 128 where G is a power of two, else 8-row padding left unloaded.
  mbarrier_arrive_expect_tx(bars.full_q, a.group * positions * 2 * kRowBytes);
  for (int h = 0; h < a.group; ++h) {
    unsigned char* dst = smem + kQOffset + h * positions * kRowBytes;
    tma_load_3d(dst, tm_q, bars.full_q, 0, hk * a.group + h, w.q_begin + w.m0);
    tma_load_3d(dst + kHalfBytes, tm_q, bars.full_q, 64, hk * a.group + h, w.q_begin + w.m0);
  }
  const int32_t* block_table = a.block_tables + w.b * a.bt_stride;
  for (int t = 0; t < w.n_tiles; ++t) {
    const int s = t % kStages;
    const uint32_t parity = (t / kStages) & 1;
    mbarrier_wait(&bars.empty_k[s], parity ^ 1);
    mbarrier_arrive_expect_tx(&bars.full_k[s], kTileBytes);
    load_kv_tile(smem + kKOffset + s * kTileBytes, tm_k, &bars.full_k[s], block_table, t * kBlockN,
                 k_len, hk, a);
    mbarrier_wait(&bars.empty_v[s], parity ^ 1);
    mbarrier_arrive_expect_tx(&bars.full_v[s], kTileBytes);
    load_kv_tile(smem + kVOffset + s * kTileBytes, tm_v, &bars.full_v[s], block_table, t * kBlockN,
                 k_len, hk, a);
  }
}

__global__ void __launch_bounds__(kThreads, 1)
    hopper_prefill_kernel(const __grid_constant__ CUtensorMap tm_q,
                          const __grid_constant__ CUtensorMap tm_k,
                          const __grid_constant__ CUtensorMap tm_v, const HopperArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  CtaWork w;
  w.b = blockIdx.z;
  w.hk = blockIdx.y;
  const int positions = a.positions;
  w.q_begin = a.cu_q[w.b];
  w.q_len = a.cu_q[w.b + 1] - w.q_begin;
  w.k_len = a.cu_k[w.b + 1] - a.cu_k[w.b];
  w.m0 = (gridDim.x - 1 - blockIdx.x) * positions;  // heavier (later) query tiles first
  if (w.m0 >= w.q_len) return;
  const int past = w.k_len - w.q_len;
  const int n_end = min(w.k_len, past + min(w.m0 + positions, w.q_len));
  w.n_tiles = (n_end + kBlockN - 1) / kBlockN;

  uint64_t* bar = reinterpret_cast<uint64_t*>(smem + kBarOffset);
  const Barriers bars{bar, bar + 1, bar + 1 + kStages, bar + 1 + 2 * kStages,
                      bar + 1 + 3 * kStages};
  if (threadIdx.x == 0) {
    mbarrier_init(bars.full_q, 1);
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&bars.full_k[s], 1);
      mbarrier_init(&bars.full_v[s], 1);
      mbarrier_init(&bars.empty_k[s], kConsumerWarps);
      mbarrier_init(&bars.empty_v[s], kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    warpgroup_reg_dealloc<24>();
    if (threadIdx.x == 0) {
      tma_prefetch_descriptor(&tm_q);
      tma_prefetch_descriptor(&tm_k);
      tma_prefetch_descriptor(&tm_v);
      produce(&tm_q, &tm_k, &tm_v, smem, bars, a, w);
    }
  } else {
    warpgroup_reg_alloc<240>();
    consume(smem, bars, a, warpgroup - 1, w);
  }
#else
  __trap();  // built without sm_90a: the host never launches it (sm90a_built)
#endif
}

}  // namespace
}  // namespace hopper_prefill

using namespace hopper_prefill;

static_assert(kBlockM == kHopperPrefillRows, "kernels/attention.h's hopper_prefill_positions");

bool hopper_prefill_shape_ok(int64_t head_dim, int64_t hq, int64_t hkv, int64_t block_size) {
  return head_dim == kD && hkv > 0 && hq % hkv == 0 && hq / hkv >= 1 && hq / hkv <= 16 &&
         block_size > 0 && block_size % 16 == 0;
}

void prefill_attention_hopper(const PrefillAttentionParams& p, cudaStream_t stream) {
  const int64_t hq = p.q.size(1), hkv = p.kv.k_cache.size(2);
  const int64_t block_size = p.kv.k_cache.size(1), batch = p.cu_seqlens_q.numel() - 1;
  CHECK_MSG(sm90a_built(), "this build holds no sm_90a code for the Hopper prefill");
  CHECK_MSG(p.kv.k_cache.dtype == DType::kBf16 && p.kv.v_cache.dtype == DType::kBf16,
            "the Hopper prefill reads a bf16 cache only, not "
                << dtype_name(p.kv.k_cache.dtype) << " (the mma.sync kernel reads fp8)");
  CHECK_MSG(hopper_prefill_shape_ok(p.q.size(2), hq, hkv, block_size),
            "Hopper prefill: unsupported shape (head_dim " << p.q.size(2) << ", " << hq << " q / "
                                                           << hkv << " kv heads, block_size "
                                                           << block_size << ")");
  // TMA: 16-byte aligned bases and strides.
  CHECK(aligned16(p.q.data) && p.q.stride[0] % 8 == 0 && p.q.stride[1] % 8 == 0);
  CHECK_EQ(p.q.stride[2], 1);
  CHECK(p.kv.k_cache.is_contiguous() && p.kv.v_cache.is_contiguous());
  CHECK(aligned16(p.kv.k_cache.data) && aligned16(p.kv.v_cache.data));
  const int64_t cache_rows = p.kv.k_cache.size(0) * block_size;
  CHECK_LT(cache_rows, int64_t{1} << 31);
  CHECK_LE(batch, 65535);  // grid.z
  CHECK_LE(hkv, 65535);    // grid.y
  if (batch <= 0 || p.max_seqlen_q <= 0) return;

  const int group = static_cast<int>(hq / hkv);
  // Whole 8-row swizzle atoms a head, so each head's Q box starts 1024-byte aligned: 128 / G
  // where G is a power of two; else up to 7 rows of the tile are padding (G 5: 5 x 24 rows).
  const int positions = static_cast<int>(hopper_prefill_positions(group));
  HopperArgs a{};
  a.out = p.out.ptr<bf16>();
  a.out_tok = p.out.stride[0];
  a.out_head = p.out.stride[1];
  a.block_tables = p.kv.block_tables.ptr<int32_t>();
  a.bt_stride = p.kv.block_tables.stride[0];
  a.cu_q = p.cu_seqlens_q.ptr<int32_t>();
  a.cu_k = p.cu_seqlens_k.ptr<int32_t>();
  a.block_size = static_cast<int>(block_size);
  a.rows_per_load = std::gcd(static_cast<int>(block_size), kBlockN);
  a.group = group;
  a.positions = positions;
  a.scale_log2 = log2_domain_scale(p.scale);

  const CUtensorMap tm_q = swizzled_head_tile_map(p.q.data, hq, p.q.size(0), p.q.stride[1],
                                                  p.q.stride[0], positions, "q");
  const CUtensorMap tm_k = swizzled_head_tile_map(p.kv.k_cache.data, hkv, cache_rows, kD, hkv * kD,
                                                  a.rows_per_load, "k_cache");
  const CUtensorMap tm_v = swizzled_head_tile_map(p.kv.v_cache.data, hkv, cache_rows, kD, hkv * kD,
                                                  a.rows_per_load, "v_cache");
  const dim3 grid(ceil_div(p.max_seqlen_q, positions), static_cast<unsigned>(hkv),
                  static_cast<unsigned>(batch));
  // Once per process (one device per rank): not on every layer of every prefill step.
  static const bool smem_raised = [] {
    CUDA_CHECK(cudaFuncSetAttribute(hopper_prefill_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)smem_raised;
  hopper_prefill_kernel<<<grid, kThreads, kSmemBytes, stream>>>(tm_q, tm_k, tm_v, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::kernels::cuda
