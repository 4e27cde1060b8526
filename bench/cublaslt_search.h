// cuBLASLt's configuration space for one GEMM shape, beyond what its heuristic offers: the
// heuristic's picks with every split-K count (1-16) and out-of-place reduction scheme, then every
// algorithm id the library lists for bf16 x bf16 -> bf16 with f32 compute, each with every tile,
// split-K count and scheme its capabilities allow, kept where cublasLtMatmulAlgoCheck accepts
// it. Issue 33 asked whether the 0.6B shape's decode GEMMs (5.3-8 us a node at M = 16-256
// whatever the heuristic picks, against 1-3 us of weights at the copy bandwidth) have a faster
// configuration the heuristic does not offer. On an H200 they do not (1.00-1.07x, down_proj's
// split-K 8 1.12-1.20x; bench/results/h200-2026-11-28-issue33_cublaslt_exhaustive.txt).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace nanovllm::bench {

struct LtProblem {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;  // D = C
  size_t workspace_bytes;          // the most a candidate may ask for
};

// One configuration. A named wrapper: nvcc's front end fails on std::vector of the library's
// anonymous struct typedef.
struct LtConfig {
  cublasLtMatmulAlgo_t algo;
};

// The accepted configurations, at most `cap` of them: first the seeds (the heuristic's picks)
// with every split-K count and reduction scheme, then for at most `seconds` every listed
// algorithm id's tiles, split-K counts and schemes, each under the library's own stages or else
// the first stages id it accepts of the first two listed and the seeds'; progress on stderr.
// When more are valid than `cap`: the seeds' variants, then an even stride through the rest.
std::vector<LtConfig> lt_candidates(const LtProblem& p, const std::vector<LtConfig>& seeds,
                                    size_t cap, double seconds);

// "id66 tile12 stages35 splitk4 red2 swz0".
std::string lt_describe(const LtConfig& config);

struct LtTimed {
  LtConfig config;
  double us;
};

struct LtSearch {
  size_t candidates = 0;      // what lt_candidates gave
  int screened = 0;           // timed in a short graph
  int slow = 0;               // dropped by the eager pre-screen
  std::vector<LtTimed> best;  // the 3 fastest finalists, fastest first
};

// run_once(config, i, stream): one call on weight copy i, false where the library refuses it;
// graph_us(config, launches): microseconds a call in a graph launched `launches` times.
using LtRunOnce = std::function<bool(const LtConfig&, int, cudaStream_t)>;
using LtGraphUs = std::function<double(const LtConfig&, int)>;

// The whole search of one shape: lt_candidates (8 s of enumeration at most), each screened by
// 4 eager calls (dropped at 3x default_us + 10 us: some configurations take milliseconds a
// call) then a graph of 2 launches, for at most 20 s; the 8 fastest and their CTA-swizzled
// twins timed again with `launches`. Progress on stderr.
LtSearch lt_search(const LtProblem& p, const std::vector<LtConfig>& seeds, size_t cap,
                   double default_us, const LtRunOnce& run_once, const LtGraphUs& graph_us,
                   int launches);

}  // namespace nanovllm::bench
