// The configurations one nanovllm-bench invocation runs, each in a fresh benchmark process: a
// layout is `tp` ranks per engine times `dp` engine replicas (data parallelism), on tp * dp
// GPUs. They come from either
//   --tp LIST and --dp LIST: every pair, tp outer and dp inner, in the lists' order
//     (--tp 1 --dp 1,2,4: tp1xdp1, tp1xdp2, tp1xdp4; --tp 1,2: tp1xdp1, tp2xdp1 as before);
//   --layouts LIST: exactly the pairs listed, in order, e.g. dp4xtp1,dp2xtp2,dp1xtp4 (the
//     same GPUs split three ways in one table); each entry names both parts, tp<N> and dp<N>,
//     in either order, joined by 'x'.
// On CUDA a layout that needs more GPUs than are visible is refused before anything runs.
#pragma once

#include <string>
#include <vector>

namespace nanovllm::bench {

struct BenchLayout {
  int tp = 1;  // tensor-parallel ranks of each replica
  int dp = 1;  // replicas, each running the whole workload (the work scales with them)
  int gpus() const { return tp * dp; }
  bool operator==(const BenchLayout&) const = default;
};

// "tp1xdp4": how --layouts spells it, and how the logs name a configuration.
std::string layout_name(const BenchLayout& layout);

// One --layouts entry ("dp4xtp1", "tp2xdp2"). Throws UsageError saying what it expected.
BenchLayout parse_layout(const std::string& text);

// Every (tp, dp) of the two lists, tp outer. Throws UsageError for a size below 1.
std::vector<BenchLayout> layout_product(const std::vector<int>& tp_sizes,
                                        const std::vector<int>& dp_sizes);

// What the flags ask for: the --layouts entries when there are any (a UsageError when
// `tp_or_dp_given` too), else layout_product.
std::vector<BenchLayout> bench_layouts(const std::vector<int>& tp_sizes,
                                       const std::vector<int>& dp_sizes,
                                       const std::vector<std::string>& layouts,
                                       bool tp_or_dp_given);

// CUDA: throws UsageError naming the first layout that needs more GPUs than `visible_gpus`,
// e.g. "--tp 2 --dp 4 (tp2xdp4) on --device cuda needs 8 GPUs (2 ranks x 4 replicas); 4 visible
// (CUDA_VISIBLE_DEVICES)".
void check_layouts_fit(const std::vector<BenchLayout>& layouts, int visible_gpus);

}  // namespace nanovllm::bench
