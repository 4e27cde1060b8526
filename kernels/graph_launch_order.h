// When our kernels behind a library kernel (cuBLAS's GEMMs) in a captured CUDA graph launch.
// Our decode kernels overlap their neighbours by programmatic dependent launch: each lets the
// next grid launch (griddepcontrol.launch_dependents) once its own inputs are read, and the next
// does what needs nothing of this one before its griddepcontrol.wait. cuBLAS's kernels never
// allow it, so a kernel of ours behind one launches only as the GEMM's last blocks end (the
// kernel timeline: resident 0.3-0.8 us before its wait returns, bench/README.md).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace nanovllm::kernels {

// Every edge of a graph: from[i] -> to[i] with data[i].
struct GraphEdges {
  std::vector<cudaGraphNode_t> from, to;
  std::vector<cudaGraphEdgeData> data;
};
GraphEdges graph_edges(cudaGraph_t graph);
// Edge i of `edges` (read from `graph`) replaced by one with `data`.
void replace_edge(cudaGraph_t graph, const GraphEdges& edges, size_t i,
                  const cudaGraphEdgeData& data);
// The (mangled) name of the kernel `node` runs, read through the driver, which also names
// another library's kernels (the runtime cannot read such a node's parameters); null for other
// nodes or a kernel the driver cannot name.
const char* graph_kernel_name(cudaGraphNode_t node);

// Every programmatic edge of `graph` out of a kernel node that is neither ours nor NCCL's
// (cuBLAS's; named through the driver) moved to that node's launch-order port: the kernel of
// ours behind it, launched early (programmatic stream serialization), may launch once all of
// the library kernel's blocks have begun instead of once all have ended. Its
// griddepcontrol.wait still returns only after the library kernel completed with its writes
// visible (the edge stays programmatic: CUDA's cudaGraphDependencyTypeProgrammatic), so only
// the work before the wait moves earlier, and by our kernels' rule that reads nothing the
// kernel before writes. Edges between our kernels, between the library's own kernels, plain
// edges and other nodes stay as they are. Returns how many edges moved.
int launch_dependents_at_library_kernel_start(cudaGraph_t graph);

}  // namespace nanovllm::kernels
