// See cublaslt_search.h.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "bench/cublaslt_search.h"
#include "kernels/check.h"

namespace nanovllm::bench {
namespace {

constexpr cublasComputeType_t kCompute = CUBLAS_COMPUTE_32F;
constexpr int kSplits[] = {1, 2, 3, 4, 6, 8, 12, 16};
// None (split-K 1), then the partial sums in the compute type or the output type. Not
// CUBLASLT_REDUCTION_SCHEME_INPLACE: with it the first search on an H200 never finished its
// first shape (its serialization counters live in the workspace, which the runs before leave
// dirty: the likely cause, not confirmed).
constexpr uint32_t kSchemes[] = {CUBLASLT_REDUCTION_SCHEME_NONE,
                                 CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                                 CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE};

// An array capability (tile or stages ids); {0} (undefined: the library's choice) when the
// algorithm lists none.
std::vector<uint32_t> cap_ids(const cublasLtMatmulAlgo_t& algo,
                              cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes) != CUBLAS_STATUS_SUCCESS ||
      bytes == 0)
    return {0};
  std::vector<uint32_t> ids(bytes / sizeof(uint32_t));
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, ids.data(), bytes, &written) !=
      CUBLAS_STATUS_SUCCESS)
    return {0};
  return ids.empty() ? std::vector<uint32_t>{0} : ids;
}

template <typename T>
T cap_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t written = 0;
  cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &written);
  return v;
}

template <typename T>
bool set(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  return cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &v, sizeof(v)) == CUBLAS_STATUS_SUCCESS;
}

template <typename T>
long long get(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return -1;
  return static_cast<long long>(v);
}

bool accepted(const LtProblem& p, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t r{};
  return cublasLtMatmulAlgoCheck(p.lt, p.op, p.a, p.b, p.c, p.c, &algo, &r) ==
             CUBLAS_STATUS_SUCCESS &&
         r.workspaceSize <= p.workspace_bytes;
}

}  // namespace

std::string lt_describe(const LtConfig& config) {
  const cublasLtMatmulAlgo_t& algo = config.algo;
  char s[160];
  std::snprintf(s, sizeof(s), "id%lld tile%lld stages%lld splitk%lld red%lld swz%lld",
                get<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID),
                get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                get<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                get<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING));
  return s;
}

std::vector<LtConfig> lt_candidates(const LtProblem& p, const std::vector<LtConfig>& seeds,
                                    size_t cap, double seconds) {
  std::vector<LtConfig> all;
  // The seeds (the heuristic's picks) with every split-K count and reduction scheme.
  for (const LtConfig& seed : seeds) {
    const bool splits = cap_value<int32_t>(seed.algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
    const uint32_t schemes =
        cap_value<uint32_t>(seed.algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    for (int split : kSplits)
      for (uint32_t red : kSchemes) {
        if ((split > 1 && !splits) || (split == 1) != (red == 0) ||
            (red != 0 && (schemes & red) == 0))
          continue;
        cublasLtMatmulAlgo_t a = seed.algo;
        if (set<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split) &&
            set<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, red) && accepted(p, a))
          all.push_back({a});
      }
  }
  const size_t from_seeds = all.size();
  std::vector<uint32_t> seed_stages;
  for (const LtConfig& seed : seeds) {
    const long long st = get<uint32_t>(seed.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
    if (st > 0 && std::find(seed_stages.begin(), seed_stages.end(), static_cast<uint32_t>(st)) ==
                      seed_stages.end())
      seed_stages.push_back(static_cast<uint32_t>(st));
  }
  std::fprintf(stderr, "    %zu seeds: %zu split-K variants accepted\n", seeds.size(), from_seeds);
  int ids[512];
  int n_ids = 0;
  if (cublasLtMatmulAlgoGetIds(p.lt, kCompute, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                               CUDA_R_16BF, 512, ids, &n_ids) != CUBLAS_STATUS_SUCCESS)
    n_ids = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto late = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
           seconds;
  };
  for (int i = 0; i < n_ids && !late(); ++i) {
    cublasLtMatmulAlgo_t base;
    if (cublasLtMatmulAlgoInit(p.lt, kCompute, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                               CUDA_R_16BF, ids[i], &base) != CUBLAS_STATUS_SUCCESS)
      continue;
    const std::vector<uint32_t> tiles = cap_ids(base, CUBLASLT_ALGO_CAP_TILE_IDS);
    const std::vector<uint32_t> stages = cap_ids(base, CUBLASLT_ALGO_CAP_STAGES_IDS);
    const bool splits = cap_value<int32_t>(base, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT) != 0;
    const uint32_t schemes = cap_value<uint32_t>(base, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
    std::vector<uint32_t> try_stages;
    for (size_t st = 0; st < std::min<size_t>(2, stages.size()); ++st)
      if (stages[st] != 0) try_stages.push_back(stages[st]);
    for (uint32_t st : seed_stages)
      if (std::find(try_stages.begin(), try_stages.end(), st) == try_stages.end())
        try_stages.push_back(st);
    const size_t before = all.size();
    for (size_t t = 0; t < tiles.size() && !late(); ++t)
      for (int split : kSplits)
        for (uint32_t red : kSchemes) {
          if ((split > 1 && !splits) || (split == 1) != (red == 0) ||
              (red != 0 && (schemes & red) == 0))
            continue;
          cublasLtMatmulAlgo_t a = base;
          if (!set<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID, tiles[t]) ||
              !set<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, split) ||
              !set<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, red))
            continue;
          // The library's own stages, else the first accepted of the first two listed and the
          // seeds'. (On an H200 ids 66 and 67, the heuristic's own kernels, accept none of their
          // 1,261 listed tiles under any of these: only the seeds reach them.)
          if (set<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, 0u) && accepted(p, a)) {
            all.push_back({a});
            continue;
          }
          for (uint32_t st : try_stages) {
            cublasLtMatmulAlgo_t s = a;
            if (set<uint32_t>(s, CUBLASLT_ALGO_CONFIG_STAGES_ID, st) && accepted(p, s)) {
              all.push_back({s});
              break;
            }
          }
        }
    std::fprintf(stderr, "    id %d: %zu tiles, %zu stages, split-K %s: %zu accepted (%.1f s)\n",
                 ids[i], tiles.size(), stages.size(), splits ? "yes" : "no", all.size() - before,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (late()) std::fprintf(stderr, "    enumeration stopped after %.0f s\n", seconds);
  if (all.size() <= cap) return all;
  // The seeds' variants first, then an even stride through the rest.
  std::vector<LtConfig> kept(all.begin(),
                             all.begin() + static_cast<std::ptrdiff_t>(std::min(from_seeds, cap)));
  const size_t rest = all.size() - from_seeds, room = cap - kept.size();
  for (size_t i = 0; i < room; ++i) kept.push_back(all[from_seeds + i * rest / room]);
  return kept;
}

namespace {

// Times every candidate with `time_us` (negative where it does not run) and returns the `keep`
// fastest, fastest first.
std::vector<LtTimed> lt_fastest(const std::vector<LtConfig>& candidates,
                                const std::function<double(const LtConfig&)>& time_us,
                                size_t keep) {
  std::vector<LtTimed> timed;
  for (const LtConfig& a : candidates) {
    const double us = time_us(a);
    if (us > 0) timed.push_back({a, us});
  }
  std::sort(timed.begin(), timed.end(),
            [](const LtTimed& x, const LtTimed& y) { return x.us < y.us; });
  if (timed.size() > keep) timed.resize(keep);
  return timed;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

LtSearch lt_search(const LtProblem& p, const std::vector<LtConfig>& seeds, size_t cap,
                   double default_us, const LtRunOnce& run_once, const LtGraphUs& graph_us,
                   int launches) {
  LtSearch out;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<LtConfig> candidates = lt_candidates(p, seeds, cap, 8.0);
  out.candidates = candidates.size();
  const auto t1 = std::chrono::steady_clock::now();
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  const auto screen = [&](const LtConfig& c) -> double {
    if (seconds_since(t1) > 20) return -1;
    ++out.screened;
    CUDA_CHECK(cudaEventRecord(e0, nullptr));
    for (int j = 0; j < 4; ++j)
      if (!run_once(c, j, nullptr)) return -1;
    CUDA_CHECK(cudaEventRecord(e1, nullptr));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (ms * 1e3 / 4 > 3 * default_us + 10) {
      ++out.slow;
      return -1;
    }
    return graph_us(c, 2);
  };
  const std::vector<LtTimed> top = lt_fastest(candidates, screen, 8);
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));
  std::fprintf(stderr, "    %zu candidates in %.1f s, %d screened (%d slow) in %.1f s\n",
               out.candidates, std::chrono::duration<double>(t1 - t0).count(), out.screened,
               out.slow, seconds_since(t1));
  std::vector<LtConfig> finalists;
  for (const LtTimed& t : top) {
    finalists.push_back(t.config);
    LtConfig swizzled = t.config;
    if (set<uint32_t>(swizzled.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, 1u) &&
        accepted(p, swizzled.algo))
      finalists.push_back(swizzled);
  }
  out.best = lt_fastest(
      finalists, [&](const LtConfig& c) { return graph_us(c, launches); }, 3);
  return out;
}

}  // namespace nanovllm::bench
