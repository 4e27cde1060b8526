// Whether cuBLAS's GEMM kernels may take a programmatic (PDL) edge from our kernel in a CUDA
// graph, and what it saves. Our decode kernels overlap their neighbours through programmatic
// dependent launch (kernels/cuda/common.cuh); cuBLAS is called through the plain API, so the
// edges into its nodes are full dependencies. An edge can be turned programmatic after capture
// (cudaGraphEdgeData, cudaGraphDependencyTypeProgrammatic), which is safe only if the GEMM's
// kernels execute griddepcontrol.wait before reading their input.
//
//   waits:  a producer that allows the next grid at once, spins ~20 us, then writes x = 1; the
//           GEMM y = x w^T (w = 1) behind a programmatic edge; 10 launches. Any y != K means the
//           GEMM read x before the producer's writes: it does not wait.
//   chain:  28 x (producer without the spin -> GEMM with its own weights), one graph, plain
//           edges against programmatic ones: us per pair (median of 15 launches).
// Shapes: the 0.6B shape's four projections at M = 16, 64 and 256 (bf16, f32 accumulation,
// cublasGemmEx as kernels/cuda/linear.cu calls it).
//
// cublas_pdl_bench   (no arguments; no GPU: says so, exit 0)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "bench/kernel_bench_util.cuh"
#include "kernels/check.h"
#include "kernels/graph_launch_order.h"

namespace nanovllm::bench {
namespace {

constexpr int kLayers = 28;

__global__ void producer_kernel(__nv_bfloat16* x, int n, long long spin_cycles) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const long long t0 = clock64();
  while (clock64() - t0 < spin_cycles) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = __float2bfloat16(1.f);
}

__global__ void count_wrong_kernel(const __nv_bfloat16* y, int n, float expect, int* wrong) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    if (__bfloat162float(y[i]) != expect) atomicAdd(wrong, 1);
}

struct Shape {
  const char* name;
  int n, k;
};

// y[M, N] = x[M, K] w[N, K]^T, as kernels/cuda/linear.cu calls cuBLAS.
void gemm(cublasHandle_t h, int m, const Shape& s, const void* w, const void* x, void* y) {
  const float alpha = 1.f, beta = 0.f;
  CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, s.n, m, s.k, &alpha, w, CUDA_R_16BF, s.k,
                            x, CUDA_R_16BF, s.k, &beta, y, CUDA_R_16BF, s.n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

void launch_producer(cudaStream_t stream, void* x, int n, long long spin_cycles) {
  producer_kernel<<<132, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(x), n, spin_cycles);
  CUDA_CHECK_LAUNCH();
}

// Whether a graph node runs producer_kernel.
bool is_producer(cudaGraphNode_t node) {
  const char* name = kernels::graph_kernel_name(node);
  return name != nullptr && std::strstr(name, "producer_kernel") != nullptr;
}

// Every edge from a producer node to a kernel node made programmatic; returns how many.
int make_programmatic(cudaGraph_t g) {
  const kernels::GraphEdges edges = kernels::graph_edges(g);
  int changed = 0;
  for (size_t i = 0; i < edges.data.size(); ++i) {
    cudaGraphNodeType to_type;
    CUDA_CHECK(cudaGraphNodeGetType(edges.to[i], &to_type));
    if (to_type != cudaGraphNodeTypeKernel || !is_producer(edges.from[i])) continue;
    cudaGraphEdgeData programmatic{};
    programmatic.type = cudaGraphDependencyTypeProgrammatic;
    programmatic.from_port = cudaGraphKernelNodePortProgrammatic;
    kernels::replace_edge(g, edges, i, programmatic);
    ++changed;
  }
  return changed;
}

// The steps captured into one graph; programmatic: its producer -> kernel edges made so, and
// *changed how many.
cudaGraphExec_t capture(cudaStream_t stream, const std::vector<std::function<void()>>& steps,
                        bool programmatic, int* changed) {
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (const auto& step : steps) step();
  CUDA_CHECK(cudaStreamEndCapture(stream, &g));
  *changed = programmatic ? make_programmatic(g) : 0;
  CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
  CUDA_CHECK(cudaGraphDestroy(g));
  return exec;
}

void run_shape(cublasHandle_t h, cudaStream_t stream, int m, const Shape& s, int* wrong_dev) {
  const size_t x_bytes = size_t{2} * m * s.k, y_bytes = size_t{2} * m * s.n,
               w_bytes = size_t{2} * s.n * s.k;
  void *x, *y;
  CUDA_CHECK(cudaMalloc(&x, x_bytes));
  CUDA_CHECK(cudaMalloc(&y, y_bytes));
  const std::vector<__nv_bfloat16> ones(w_bytes / 2, __float2bfloat16(1.f));
  std::vector<void*> w(kLayers);
  for (void*& p : w) {
    CUDA_CHECK(cudaMalloc(&p, w_bytes));
    CUDA_CHECK(cudaMemcpy(p, ones.data(), w_bytes, cudaMemcpyHostToDevice));
  }
  const int xn = m * s.k;
  // Once eagerly: cuBLAS's first call of a shape may add set-up nodes to a capture.
  gemm(h, m, s, w[0], x, y);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  // waits: x zeroed, then the slow producer, then the GEMM behind a programmatic edge (none
  // where the GEMM's first node is not a kernel: then nothing is measured for the shape).
  int edges = 0;
  cudaGraphExec_t exec =
      capture(stream,
              {[&] { CUDA_CHECK(cudaMemsetAsync(x, 0, x_bytes, stream)); },
               [&] { launch_producer(stream, x, xn, 40000); }, [&] { gemm(h, m, s, w[0], x, y); }},
              true, &edges);
  int wrong = 0;
  for (int r = 0; r < 10 && edges > 0; ++r) {
    CUDA_CHECK(cudaMemsetAsync(wrong_dev, 0, sizeof(int), stream));
    CUDA_CHECK(cudaMemsetAsync(y, 0, y_bytes, stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    count_wrong_kernel<<<132, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(y), m * s.n,
                                                static_cast<float>(s.k), wrong_dev);
    int got = 0;
    CUDA_CHECK(cudaMemcpyAsync(&got, wrong_dev, sizeof(int), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    wrong += got;
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  // chain: 28 producer -> GEMM pairs, plain and programmatic.
  std::vector<std::function<void()>> steps;
  for (int l = 0; l < kLayers; ++l) {
    steps.push_back([&] { launch_producer(stream, x, xn, 0); });
    steps.push_back([&, l] { gemm(h, m, s, w[l], x, y); });
  }
  double us[2] = {0, 0};
  int chain_edges = 0;
  for (int programmatic = 0; programmatic < 2 && edges > 0; ++programmatic) {
    exec = capture(stream, steps, programmatic == 1, &chain_edges);
    us[programmatic] = graph_launch_ms(exec, stream, 15) * 1e3 / kLayers;
    CUDA_CHECK(cudaGraphExecDestroy(exec));
  }
  if (edges == 0) {
    std::printf("%-8s %4d %6d %6d   no producer -> kernel edge to make programmatic\n", s.name, m,
                s.n, s.k);
  } else {
    std::printf("%-8s %4d %6d %6d %10s %12.2f %12.2f %8.3f\n", s.name, m, s.n, s.k,
                wrong == 0 ? "yes" : "NO", us[0], us[1], us[1] / us[0]);
  }
  std::printf(
      "JSON {\"bench\":\"cublas_pdl\",\"gemm\":\"%s\",\"m\":%d,\"n\":%d,\"k\":%d,"
      "\"programmatic_edges\":%d,\"chain_edges\":%d,\"wrong_outputs\":%d,\"plain_us\":%.3f,"
      "\"programmatic_us\":%.3f}\n",
      s.name, m, s.n, s.k, edges, chain_edges, wrong, us[0], us[1]);
  std::fflush(stdout);
  for (void* p : w) CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaFree(x));
  CUDA_CHECK(cudaFree(y));
}

}  // namespace
}  // namespace nanovllm::bench

int main() {
  using namespace nanovllm::bench;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("cublas_pdl_bench: no CUDA device, nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* workspace;
  CUDA_CHECK(cudaMalloc(&workspace, 32 << 20));
  CUBLAS_CHECK(cublasSetWorkspace(h, workspace, 32 << 20));
  CUBLAS_CHECK(cublasSetStream(h, stream));
  int* wrong;
  CUDA_CHECK(cudaMalloc(&wrong, sizeof(int)));
  std::printf("device %s; us per (producer -> GEMM) pair, %d pairs a graph\n\n", prop.name,
              kLayers);
  std::printf("%-8s %4s %6s %6s %10s %12s %12s %8s\n", "gemm", "M", "N", "K", "waits", "plain us",
              "prog. us", "ratio");
  const Shape shapes[] = {
      {"qkv", 4096, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072}};
  for (const int m : {16, 64, 256})
    for (const Shape& s : shapes) run_shape(h, stream, m, s, wrong);
  CUDA_CHECK(cudaFree(wrong));
  CUDA_CHECK(cudaFree(workspace));
  CUBLAS_CHECK(cublasDestroy(h));
  return 0;
}
