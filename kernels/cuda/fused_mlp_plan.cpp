// The fused decode MLP's cut over the SMs (kernels/fused_mlp.h's fused_mlp_plan). Host code
// only, so that CI pins the arithmetic without a GPU.
#include <algorithm>
#include <cstdint>

#include "kernels/fused_mlp.h"

namespace nanovllm::kernels {
namespace {

constexpr int64_t kWarps = 8;  // a block's warps: its act columns and down rows go round them
constexpr int64_t kDownBarrierBytes = kWarps * 8;         // a down mbarrier a warp
constexpr int64_t kBarrierBytes = 2 * kDownBarrierBytes;  // and a gate_up one (held)

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

std::optional<FusedMlpPlan> fused_mlp_plan(int64_t m, int64_t hidden, int64_t inter, int sms,
                                           int64_t smem_limit) {
  const bool held = (hidden == 1024 || hidden == 2048) && m <= kFusedMlpMaxM;
  const bool streamed = hidden == kFusedMlpStreamHidden && m == 1;
  if (m < 1 || !(held || streamed) || inter < 8 || inter % 8 != 0 || sms < 1) return {};
  FusedMlpPlan plan;
  // The fewest columns and rows a block that spread both over every SM: then as few blocks as
  // still take them all (the 0.6B on 132 SMs: 24 act columns and 8 down rows, 128 blocks).
  const int64_t act = ceil_div(inter, sms), rows = ceil_div(hidden, sms);
  plan.act_per_block = static_cast<int>(act);
  plan.rows_per_block = static_cast<int>(rows);
  plan.blocks = static_cast<int>(std::max(ceil_div(inter, act), ceil_div(hidden, rows)));
  plan.stream_gate_up = streamed;
  // bf16: [2 act][H] gate and up rows (held only), [rows][I] down rows, [M][H] x and
  // residual (held; streamed: x only, the norm stays with the caller), [M][I] act.
  plan.smem_bytes =
      streamed ? 2 * (rows * inter + m * (hidden + inter)) + kDownBarrierBytes
               : 2 * (2 * act * hidden + rows * inter + m * (2 * hidden + inter)) + kBarrierBytes;
  if (plan.smem_bytes > smem_limit) return {};
  return plan;
}

bool fused_mlp_takes_out_proj(const FusedMlpPlan& plan, int64_t q_width) {
  return plan.rows_per_block <= kWarps && (q_width == 1024 || q_width == 2048);
}

}  // namespace nanovllm::kernels
