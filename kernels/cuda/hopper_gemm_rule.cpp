// The Hopper decode GEMM's rule (kernels/hopper_gemm.h's hopper_gemm_wins and
// hopper_gemm_decode_config): where the decode step measured it faster than the skinny GEMM and
// cuBLAS, and with which config. Host code only.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/hopper_gemm.h"

namespace nanovllm::kernels {
namespace {

// The most weights (N * K) and inputs (K) for which the Hopper decode GEMM is chosen: the
// 0.6B's qkv_proj (4M) and gate_up_proj (6M) at K = 1024, whose blocks' shares (<= 80 KB) are
// requested whole while the norm before them still runs. The 1.7B's qkv_proj (K = 2048, 8M,
// 160 KB a block) made its decode step 1.01-1.05x slower at batch 16-32 on an H200.
constexpr int64_t kHopperMaxWeights = int64_t{6} << 20;
constexpr int64_t kHopperMaxK = 1024;
// The most tokens for which the projections behind a norm take it: the 0.6B decode step on an
// H200 took 0.95-0.99x the time with it at batch 9-32 and 1.03-1.06x at 40-64 (two rounds, same
// call).
constexpr int64_t kHopperMaxM = 32;

// The fewest tokens for which projections that are not behind an RMSNorm take it (the skinny
// GEMM, launched early, is faster below), their most outputs (N) and their fewest inputs (K):
// the 0.6B's o_proj (K 2048) and down_proj (K 3072) at --tp 1. Their --tp 2 shards (K 1024 and
// 1536) measured 0.94-1.01x the step of cuBLAS at batch 17-32 on two H200s, within that call's
// spread, so they stay on cuBLAS.
constexpr int64_t kHopperRowMinM = 17;
constexpr int64_t kHopperRowMaxN = 1024;
constexpr int64_t kHopperRowMinK = 2048;
// Their most tokens, and their split: in clusters of 4 ranks of 64-row blocks (64 blocks for the
// 0.6B's 1024 outputs), the 0.6B decode step on an H200 took 0.96-0.98x the time of the rule
// before (8 ranks, 32 tokens at most) at batch 17-64 and 64 x 512/512 0.972x its TPOT; 8 ranks
// with the same bound tied the rule before, 2 ranks were slower
// (bench/results/h200-2026-11-28-issue33_hopper_row_split.txt).
constexpr int64_t kHopperRowMaxM = 64;
constexpr int kHopperRowSplit = 4;

// The most tokens for which the fused qkv + rope keeps the guess's whole split.
constexpr int64_t kQkvRopeFullSplitMaxM = 16;

bool takes_row_projection(int64_t m, int64_t n, int64_t k) {
  return m >= kHopperRowMinM && m <= kHopperRowMaxM && n * k <= kHopperMaxWeights &&
         n <= kHopperRowMaxN && k >= kHopperRowMinK;
}

}  // namespace

// Where the Hopper decode GEMM is the faster path, measured inside the 0.6B decode step on an
// H200 (bench/results/h200-2026-11-28-issue33_hopper_gemm.txt), at most kHopperMaxWeights
// weights:
//   - behind an RMSNorm (which lets it launch at its start: qkv_proj and gate_up_proj), from 9
//     to kHopperMaxM tokens (the skinny GEMM serves fewer) on projections that widen (N > K,
//     K <= kHopperMaxK). At batch 16 qkv_proj and rotary took 7.5 us a layer against cuBLAS's 9.45,
//     gate_up_proj with the activation in its epilogue 5.8 against cuBLAS and silu_and_mul's 8.9.
//   - elsewhere (o_proj behind the attention, down_proj behind gate_up_proj), from 17 to
//     kHopperRowMaxM tokens on at most kHopperRowMaxN outputs and kHopperRowMinK inputs: there
//     it replaces cuBLAS, 0.93-0.96x the step at batch 17-32, and with kHopperRowSplit ranks
//     0.96-0.98x again at 17-64. Up to 16 tokens the skinny GEMM stays: behind the
//     attention the Hopper GEMM's blocks find no room to start early (o_proj 8.99 us a layer at
//     batch 16 against the skinny GEMM's 4.40; down_proj 8.58 against 6.41).
bool hopper_gemm_wins(int64_t m, int64_t n, int64_t k, bool behind_norm) {
  if (!behind_norm) return takes_row_projection(m, n, k);
  if (m > kHopperMaxM || n * k > kHopperMaxWeights) return false;
  return m > 8 && n > k && k <= kHopperMaxK;
}

std::optional<HopperGemmConfig> hopper_gemm_decode_config(int64_t m, int64_t n, int64_t k,
                                                          bool gate_up_act, bool behind_norm) {
  if (!gate_up_act && !behind_norm && takes_row_projection(m, n, k) &&
      hopper_gemm_supports(m, n, k))
    return HopperGemmConfig{1, kHopperRowSplit, true};
  const std::vector<HopperGemmConfig> configs = hopper_gemm_configs(m, n, k, gate_up_act);
  if (configs.empty()) return {};
  HopperGemmConfig first = configs.front();
  first.pdl = true;
  return first;
}

// Blocks of one head, as many ranks as hopper_gemm_configs' guess for that height up to 16
// tokens and half of them above. The 0.6B decode step on an H200 (greedy, context 1025; two
// rounds, bench/results/h200-2026-11-29-issue33_qkv_rope_epilogue.txt), against the GEMM and
// the separate kernel: batch 9-16 (graph of 16) 0.979x with 4 ranks; batch 20-32 (graph of 32)
// 0.989x with 2, 1.007x with 4. The --tp 2 shard (16 heads, 8 ranks at first) was not measured.
HopperGemmConfig hopper_gemm_qkv_rope_config(int64_t m, int64_t n, int64_t k) {
  HopperGemmConfig c{2, 1, true};
  for (const HopperGemmConfig& guess : hopper_gemm_configs(m, n, k))
    if (guess.warpgroups == 2) {
      c.split = guess.split;
      break;
    }
  if (m > kQkvRopeFullSplitMaxM) c.split = std::max(1, c.split / 2);
  return c;
}

}  // namespace nanovllm::kernels
