// cuBLASLt's algorithms on the decode GEMMs of Qwen3-0.6B and Qwen3-8B: for each shape and M,
// cublasGemmEx's default (what kernels::cuda::linear runs) against every algorithm
// cublasLtMatmulAlgoGetHeuristic offers (up to 32, 32 MiB workspace), each timed inside a CUDA
// graph of >= 20 calls that rotate through >= 256 MB of weight copies (every call reads HBM), as
// gemm_bench times its rows. It answers issue 15's "cuBLASLt with an algorithm chosen per shape
// at start-up": whether any algorithm beats the default by enough to pay for a timing pass.
//
// Per shape and M: the default, Lt's first pick, the fastest Lt algorithm with its config
// (algo id, tile id, split-K count, reduction scheme, stages id, cluster shape id) and the
// limit max(bytes / copy bandwidth, FLOPs / bf16 peak), both ceilings measured at start
// (bench/machine_limits.h); then, per model, the sum over one
// decode step (layers x the four projections) for the default and for the fastest per shape.
// --tp N: one rank's shards of the shapes (qkv and gate_up split their N, o_proj and
// down_proj their K), the GEMMs a rank of --tp N runs. --exhaustive: also the configurations
// bench/cublaslt_search.h enumerates, up to --max-candidates a shape, screened in short graphs,
// the 8 fastest timed again like the rest and the winner's y checked against the default's.
// --tokens and --gemm pick shapes: run one a process under a time limit (a configuration that
// never finishes cannot be stopped from inside).
//
// Usage: cublaslt_bench [--model 0.6b|8b] [--launches N] [--tp N] [--tokens M,M,...]
//                       [--gemm qkv_proj|o_proj|gate_up_proj|down_proj] [--exhaustive]
//                       [--max-candidates N]
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "bench/cublaslt_search.h"
#include "bench/kernel_bench_util.cuh"
#include "bench/machine_limits.h"
#include "kernels/check.h"

namespace nanovllm::bench {
namespace {

constexpr int kMinCalls = 20;
constexpr size_t kRotateBytes = size_t{256} << 20;
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int64_t kTokens[] = {16, 32, 64, 128, 256};  // --tokens picks some of them

struct Gemm {
  const char* model;
  const char* name;
  int64_t n, k;
  int layers;
  bool row_parallel;  // under tensor parallelism K is split (else N)
};
constexpr Gemm kGemms[] = {
    {"0.6b", "qkv_proj", 4096, 1024, 28, false},     {"0.6b", "o_proj", 1024, 2048, 28, true},
    {"0.6b", "gate_up_proj", 6144, 1024, 28, false}, {"0.6b", "down_proj", 1024, 3072, 28, true},
    {"8b", "qkv_proj", 6144, 4096, 36, false},       {"8b", "o_proj", 4096, 4096, 36, true},
    {"8b", "gate_up_proj", 24576, 4096, 36, false},  {"8b", "down_proj", 4096, 12288, 36, true},
};

// One rank's shard of g at --tp tp.
Gemm shard_of(Gemm g, int tp) {
  (g.row_parallel ? g.k : g.n) /= tp;
  return g;
}

#define LT_CHECK(call) CHECK_EQ(static_cast<int>(call), static_cast<int>(CUBLAS_STATUS_SUCCESS))

struct Handles {
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  void* workspace;
};

struct Result {
  double default_us = 0, first_lt_us = 0, best_lt_us = 0, limit_us = 0;
  std::string best_config;
  double searched_us = 1e30;  // --exhaustive: the fastest configuration found
};

struct Search {
  bool on = false;
  size_t max_candidates = 4000;  // --max-candidates
};

int algo_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  uint32_t v = 0;  // every attribute read here fits 32 bits (a few are 16 in the API)
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return -1;
  return static_cast<int>(v);
}

std::string describe(const cublasLtMatmulAlgo_t& algo) {
  char s[160];
  std::snprintf(s, sizeof(s), "id%d tile%d splitk%d red%d stages%d cluster%d",
                algo_attr(algo, CUBLASLT_ALGO_CONFIG_ID),
                algo_attr(algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                algo_attr(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                algo_attr(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                algo_attr(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                algo_attr(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
  return s;
}

// Row-major y[M, N] = x[M, K] w[N, K]^T is column-major y^T[N, M] = op(w)^T x^T: A = w
// (K x N, ld K, transposed), B = x (K x M, ld K), C = D = y (N x M, ld N).
Result run(const Gemm& g, int64_t m, const Handles& h, const MachineLimits& lim, int launches,
           const Search& search) {
  const size_t w_bytes = g.n * g.k * 2;
  const WeightCopies ws(g.n, g.k, kRotateBytes);
  DeviceBuf x(m * g.k * 2), y(m * g.n * 2);  // [M, K], [M, N] bf16
  x.fill_random_bf16(7);
  const int calls = std::max(kMinCalls, ws.count());
  const float alpha = 1.f, beta = 0.f;
  const int n = static_cast<int>(g.n), k = static_cast<int>(g.k), mm = static_cast<int>(m);

  Result r;
  r.default_us = time_graph_us(
      [&](int i, cudaStream_t s) {
        CUBLAS_CHECK(cublasSetStream(h.blas, s));
        CUBLAS_CHECK(cublasGemmEx(h.blas, CUBLAS_OP_T, CUBLAS_OP_N, n, mm, k, &alpha, ws[i],
                                  CUDA_R_16BF, k, x.ptr, CUDA_R_16BF, k, &beta, y.ptr, CUDA_R_16BF,
                                  n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      },
      calls, launches);

  cublasLtMatmulDesc_t op;
  LT_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LT_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  cublasLtMatrixLayout_t a_l, b_l, c_l;
  LT_CHECK(cublasLtMatrixLayoutCreate(&a_l, CUDA_R_16BF, k, n, k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&b_l, CUDA_R_16BF, k, mm, k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&c_l, CUDA_R_16BF, n, mm, n));
  cublasLtMatmulPreference_t pref;
  LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t wsb = kWorkspaceBytes;
  LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &wsb, sizeof(wsb)));
  cublasLtMatmulHeuristicResult_t found[32];
  int count = 0;
  LT_CHECK(cublasLtMatmulAlgoGetHeuristic(h.lt, op, a_l, b_l, c_l, c_l, pref, 32, found, &count));
  r.best_lt_us = 1e30;
  for (int i = 0; i < count; ++i) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
    const double us = time_graph_us(
        [&](int j, cudaStream_t s) {
          LT_CHECK(cublasLtMatmul(h.lt, op, &alpha, ws[j], a_l, x.ptr, b_l, &beta, y.ptr, c_l,
                                  y.ptr, c_l, &found[i].algo, h.workspace, kWorkspaceBytes, s));
        },
        calls, launches);
    if (i == 0) r.first_lt_us = us;
    if (us < r.best_lt_us) {
      r.best_lt_us = us;
      r.best_config = describe(found[i].algo) + " (#" + std::to_string(i) + ")";
    }
  }
  if (search.on) {
    const auto run_once = [&](const LtConfig& c, int i, cudaStream_t s) {
      return cublasLtMatmul(h.lt, op, &alpha, ws[i], a_l, x.ptr, b_l, &beta, y.ptr, c_l, y.ptr, c_l,
                            &c.algo, h.workspace, kWorkspaceBytes, s) == CUBLAS_STATUS_SUCCESS;
    };
    const auto graph_us = [&](const LtConfig& c, int n_launches) {
      return time_graph_us([&](int j, cudaStream_t s) { CHECK(run_once(c, j, s)); }, calls,
                           n_launches);
    };
    std::vector<LtConfig> seeds;
    for (int i = 0; i < count; ++i)
      if (found[i].state == CUBLAS_STATUS_SUCCESS) seeds.push_back({found[i].algo});
    std::fprintf(stderr, "%s %s M=%lld:\n", g.model, g.name, static_cast<long long>(m));
    const LtSearch found_best =
        lt_search({h.lt, op, a_l, b_l, c_l, kWorkspaceBytes}, seeds, search.max_candidates,
                  r.default_us, run_once, graph_us, launches);
    if (!found_best.best.empty()) {
      const LtConfig& winner = found_best.best.front().config;
      r.searched_us = found_best.best.front().us;
      // Correctness of the winner: y from weight copy 0 against the default's.
      DeviceBuf y_ref(m * g.n * 2);
      CUBLAS_CHECK(cublasSetStream(h.blas, nullptr));
      CUBLAS_CHECK(cublasGemmEx(h.blas, CUBLAS_OP_T, CUBLAS_OP_N, n, mm, k, &alpha, ws[0],
                                CUDA_R_16BF, k, x.ptr, CUDA_R_16BF, k, &beta, y_ref.ptr,
                                CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      CHECK(run_once(winner, 0, nullptr));
      CUDA_CHECK(cudaDeviceSynchronize());
      const float diff = max_abs_diff_bf16(y, &y_ref);
      std::printf(
          "  search %-5s %-13s M=%-4lld %zu candidates: default %.2f us, best %.2f us "
          "(%.2fx) %s, max abs diff %.3g; next",
          g.model, g.name, static_cast<long long>(m), found_best.candidates, r.default_us,
          r.searched_us, r.default_us / r.searched_us, lt_describe(winner).c_str(), diff);
      for (size_t i = 1; i < found_best.best.size(); ++i)
        std::printf(" %.2f us %s;", found_best.best[i].us,
                    lt_describe(found_best.best[i].config).c_str());
      std::printf("\n");
    }
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(a_l);
  cublasLtMatrixLayoutDestroy(b_l);
  cublasLtMatrixLayoutDestroy(c_l);
  cublasLtMatmulDescDestroy(op);

  const double flops = 2.0 * m * g.n * g.k;
  const double bytes = static_cast<double>(m * g.k * 2 + w_bytes + m * g.n * 2);
  r.limit_us = std::max(bytes / lim.copy_bytes_per_s, flops / lim.bf16_flop_per_s) * 1e6;
  std::printf("%-5s %-13s M=%-4lld %9.2f %9.2f %9.2f %7.2f %7.2f  %s [%d algos]\n", g.model, g.name,
              static_cast<long long>(m), r.default_us, r.first_lt_us, r.best_lt_us,
              r.limit_us / r.default_us, r.limit_us / r.best_lt_us, r.best_config.c_str(), count);
  std::fflush(stdout);
  return r;
}

}  // namespace
}  // namespace nanovllm::bench

int main(int argc, char** argv) {
  using namespace nanovllm::bench;
  const char* model = nullptr;
  int launches = 10, tp = 1;
  Search search;
  std::vector<int64_t> tokens(std::begin(kTokens), std::end(kTokens));
  const char* only_gemm = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--model") && i + 1 < argc) {
      model = argv[++i];
    } else if (!std::strcmp(argv[i], "--launches") && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      launches = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tp") && i + 1 < argc &&
               (!std::strcmp(argv[i + 1], "1") || !std::strcmp(argv[i + 1], "2") ||
                !std::strcmp(argv[i + 1], "4") || !std::strcmp(argv[i + 1], "8"))) {
      tp = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      tokens.clear();
      bool ok = true;
      for (const char* p = argv[++i]; ok && *p != '\0';) {
        char* end = nullptr;
        const long v = std::strtol(p, &end, 10);
        ok = end != p && v > 0 && (*end == ',' || *end == '\0');
        if (ok) tokens.push_back(v);
        p = *end == ',' ? end + 1 : end;
      }
      if (!ok || tokens.empty()) {
        std::fprintf(stderr, "--tokens wants a list such as 16,64\n");
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--gemm") && i + 1 < argc) {
      only_gemm = argv[++i];
      if (std::none_of(std::begin(kGemms), std::end(kGemms),
                       [&](const Gemm& g) { return !std::strcmp(g.name, only_gemm); })) {
        std::fprintf(stderr, "--gemm %s: not one of qkv_proj, o_proj, gate_up_proj, down_proj\n",
                     only_gemm);
        return 2;
      }
    } else if (!std::strcmp(argv[i], "--exhaustive")) {
      search.on = true;
    } else if (!std::strcmp(argv[i], "--max-candidates") && i + 1 < argc &&
               std::atoi(argv[i + 1]) > 0) {
      search.max_candidates = static_cast<size_t>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr,
                   "usage: %s [--model 0.6b|8b] [--launches N] [--tp 1|2|4|8] [--tokens M,M,...] "
                   "[--gemm NAME] [--exhaustive] [--max-candidates N]\n",
                   argv[0]);
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a redirected file as they come
  Handles h;
  CUBLAS_CHECK(cublasCreate(&h.blas));
  LT_CHECK(cublasLtCreate(&h.lt));
  DeviceBuf workspace(kWorkspaceBytes);  // shared by both paths: nothing allocates in a capture
  h.workspace = workspace.ptr;
  CUBLAS_CHECK(cublasSetWorkspace(h.blas, workspace.ptr, kWorkspaceBytes));
  const MachineLimits lim = measure_machine_limits();
  std::printf(
      "device %s, %d SMs; D2D copy %.0f GB/s (read + write); cuBLAS bf16 %.0f TFLOP/s; one "
      "rank of --tp %d\n",
      lim.device.c_str(), lim.sm_count, lim.copy_bytes_per_s / 1e9, lim.bf16_flop_per_s / 1e12, tp);
  std::printf("%-5s %-13s %-6s %9s %9s %9s %7s %7s  %s\n", "model", "gemm", "M", "default",
              "lt_first", "lt_best", "lim/def", "lim/lt", "fastest Lt config");
  for (const char* mdl : {"0.6b", "8b"}) {
    if (model != nullptr && std::strcmp(model, mdl) != 0) continue;
    for (int64_t m : tokens) {
      double step_default = 0, step_best = 0, step_limit = 0, step_searched = 0;
      for (const Gemm& g : kGemms) {
        if (std::strcmp(g.model, mdl) != 0 || (only_gemm && std::strcmp(g.name, only_gemm) != 0))
          continue;
        const Result r = run(shard_of(g, tp), m, h, lim, launches, search);
        step_default += g.layers * r.default_us;
        step_searched += g.layers * std::min({r.default_us, r.best_lt_us, r.searched_us});
        step_best += g.layers * std::min(r.default_us, r.best_lt_us);
        step_limit += g.layers * r.limit_us;
      }
      std::printf(
          "%-5s step M=%-4lld default %.0f us (%.0f %% of limit), fastest per shape %.0f us "
          "(%.0f %%)\n",
          mdl, static_cast<long long>(m), step_default, 100 * step_limit / step_default, step_best,
          100 * step_limit / step_best);
      if (search.on)
        std::printf(
            "%-5s step M=%-4lld fastest per shape with the exhaustive search %.0f us (%.0f %%)\n",
            mdl, static_cast<long long>(m), step_searched, 100 * step_limit / step_searched);
    }
  }
  cublasLtDestroy(h.lt);
  cublasDestroy(h.blas);
  return 0;
}
