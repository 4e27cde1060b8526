#include "bench/nanovllm_bench_layouts.h"

#include <cctype>
#include <optional>

#include "launcher/usage_error.h"

namespace nanovllm::bench {

namespace {

// "tp2" -> {"tp", 2}; nullopt when the part is not two letters and a positive number.
struct LayoutPart {
  std::string name;
  int size = 0;
};
std::optional<LayoutPart> layout_part(const std::string& text) {
  if (text.size() < 3 || text.size() > 8) return std::nullopt;
  for (size_t i = 2; i < text.size(); ++i)
    if (std::isdigit(static_cast<unsigned char>(text[i])) == 0) return std::nullopt;
  LayoutPart part{text.substr(0, 2), std::stoi(text.substr(2))};
  if ((part.name != "tp" && part.name != "dp") || part.size < 1) return std::nullopt;
  return part;
}

}  // namespace

std::string layout_name(const BenchLayout& layout) {
  return "tp" + std::to_string(layout.tp) + "xdp" + std::to_string(layout.dp);
}

BenchLayout parse_layout(const std::string& text) {
  const auto bad = [&] {
    return UsageError("--layouts '" + text +
                      "': expected tp<N>xdp<N> or dp<N>xtp<N>, e.g. dp4xtp1 (4 replicas of 1 "
                      "rank each), N >= 1");
  };
  const size_t cross = text.find('x');
  if (cross == std::string::npos) throw bad();
  const std::optional<LayoutPart> a = layout_part(text.substr(0, cross));
  const std::optional<LayoutPart> b = layout_part(text.substr(cross + 1));
  if (!a || !b || a->name == b->name) throw bad();
  return a->name == "tp" ? BenchLayout{a->size, b->size} : BenchLayout{b->size, a->size};
}

std::vector<BenchLayout> layout_product(const std::vector<int>& tp_sizes,
                                        const std::vector<int>& dp_sizes) {
  std::vector<BenchLayout> layouts;
  for (const int tp : tp_sizes) {
    if (tp < 1) throw UsageError("--tp: every size must be >= 1");
    for (const int dp : dp_sizes) {
      if (dp < 1) throw UsageError("--dp: every size must be >= 1");
      layouts.push_back(BenchLayout{tp, dp});
    }
  }
  return layouts;
}

std::vector<BenchLayout> bench_layouts(const std::vector<int>& tp_sizes,
                                       const std::vector<int>& dp_sizes,
                                       const std::vector<std::string>& layouts,
                                       bool tp_or_dp_given) {
  if (layouts.empty()) return layout_product(tp_sizes, dp_sizes);
  if (tp_or_dp_given)
    throw UsageError(
        "--layouts names each configuration's tp and dp: give it without --tp "
        "and --dp");
  std::vector<BenchLayout> parsed;
  for (const std::string& l : layouts) parsed.push_back(parse_layout(l));
  return parsed;
}

void check_layouts_fit(const std::vector<BenchLayout>& layouts, int visible_gpus) {
  for (const BenchLayout& l : layouts) {
    if (l.gpus() <= visible_gpus) continue;
    const std::string shape = l.dp == 1 ? "--tp " + std::to_string(l.tp)
                                        : "--tp " + std::to_string(l.tp) + " --dp " +
                                              std::to_string(l.dp) + " (" + layout_name(l) + ")";
    throw UsageError(shape + " on --device cuda needs " + std::to_string(l.gpus()) + " GPU" +
                     (l.gpus() == 1 ? "" : "s") + " (" + std::to_string(l.tp) + " rank" +
                     (l.tp == 1 ? "" : "s") + " x " + std::to_string(l.dp) + " replica" +
                     (l.dp == 1 ? "" : "s") + "); " + std::to_string(visible_gpus) +
                     " visible (CUDA_VISIBLE_DEVICES)");
  }
}

}  // namespace nanovllm::bench
