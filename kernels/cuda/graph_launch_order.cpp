// kernels/graph_launch_order.h: the edges are read and rewritten through the runtime, a
// kernel's name through the driver.
#include "kernels/graph_launch_order.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstring>
#include <vector>

#include "kernels/check.h"
#include "kernels/cuda/driver_entry.h"

namespace nanovllm::kernels {

GraphEdges graph_edges(cudaGraph_t graph) {
  size_t count = 0;
  CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  GraphEdges e;
  e.from.resize(count);
  e.to.resize(count);
  e.data.resize(count);
  CUDA_CHECK(cudaGraphGetEdges(graph, e.from.data(), e.to.data(), e.data.data(), &count));
  return e;
}

void replace_edge(cudaGraph_t graph, const GraphEdges& edges, size_t i,
                  const cudaGraphEdgeData& data) {
  CUDA_CHECK(cudaGraphRemoveDependencies(graph, &edges.from[i], &edges.to[i], &edges.data[i], 1));
  CUDA_CHECK(cudaGraphAddDependencies(graph, &edges.from[i], &edges.to[i], &data, 1));
}

const char* graph_kernel_name(cudaGraphNode_t node) {
  cudaGraphNodeType type;
  CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) return nullptr;
  static const auto node_params =
      cuda::driver_entry<PFN_cuGraphKernelNodeGetParams_v12000>("cuGraphKernelNodeGetParams");
  static const auto func_name =
      cuda::driver_entry<PFN_cuFuncGetName_v12030>("cuFuncGetName", 12030);
  static const auto kern_name =
      cuda::driver_entry<PFN_cuKernelGetName_v12030>("cuKernelGetName", 12030);
  CUDA_KERNEL_NODE_PARAMS_v2 p{};
  if (node_params(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS) return nullptr;
  const char* name = nullptr;
  if (p.func != nullptr) {
    if (func_name(&name, p.func) != CUDA_SUCCESS) return nullptr;
  } else if (p.kern != nullptr) {
    if (kern_name(&name, p.kern) != CUDA_SUCCESS) return nullptr;
  }
  return name;
}

namespace {

// Whose kernel a node runs, from its mangled name: ours all sit in namespace nanovllm; NCCL's
// collectives (whose blocks wait for the peers: their dependents keep their launch at its end);
// any other library's (cuBLAS's GEMMs, whose blocks never allow their dependents early).
enum class KernelOwner { kNotAKernel, kOurs, kNccl, kLibrary };

KernelOwner owner_of(cudaGraphNode_t node) {
  const char* name = graph_kernel_name(node);
  if (name == nullptr) return KernelOwner::kNotAKernel;
  if (std::strstr(name, "nanovllm") != nullptr) return KernelOwner::kOurs;
  if (std::strstr(name, "nccl") != nullptr) return KernelOwner::kNccl;
  return KernelOwner::kLibrary;
}

}  // namespace

int launch_dependents_at_library_kernel_start(cudaGraph_t graph) {
  const GraphEdges edges = graph_edges(graph);
  int moved = 0;
  for (size_t i = 0; i < edges.data.size(); ++i) {
    const cudaGraphEdgeData& d = edges.data[i];
    // Only into ours, whose work before griddepcontrol.wait follows our rule (the library's own
    // kernels behind each other, a split-K GEMM's reduction, keep their edges).
    if (d.type != cudaGraphDependencyTypeProgrammatic ||
        d.from_port != cudaGraphKernelNodePortProgrammatic ||
        owner_of(edges.from[i]) != KernelOwner::kLibrary ||
        owner_of(edges.to[i]) != KernelOwner::kOurs)
      continue;
    cudaGraphEdgeData at_start = d;
    at_start.from_port = cudaGraphKernelNodePortLaunchCompletion;
    replace_edge(graph, edges, i, at_start);
    ++moved;
  }
  return moved;
}

}  // namespace nanovllm::kernels
