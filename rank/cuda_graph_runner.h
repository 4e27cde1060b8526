// Decode through CUDA graphs (nano-vllm's capture_cudagraph and its replay in run_model).
// One graph per batch size in graph_batch_sizes(), captured largest first. A graph covers
// embedding -> final norm -> LM-head logits for its padded batch and, on rank 0, the sampler
// (its per-slot parameters are device state; padded rows carry slot -1 and sample nothing).
// With sampling from shards (--tp > 1) every size has a second graph, which ends in the shard
// candidates, their gather and rank 0's merge instead (StepCommand::sample_from_shards picks).
// Sizes up to kShortContextMaxBatch also have a short-context twin (each form) where their
// attention merges inside clusters up to some context bound below max_model_len
// (kernels/attention.h's DecodeMerge and decode_cluster_context_bound): the twin is captured
// with that bound instead of max_model_len, and a replay whose longest context is within it
// runs the twin.
//
// Memory: every intermediate comes from the model's workspace (sized for the largest step at
// warm-up and frozen before capture) and every input from the persistent buffers below, so
// all graphs share one pool by construction and nothing is allocated at replay.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "ipc/step_command.h"
#include "kernels/device_buffer.h"
#include "layers/attention_metadata.h"

namespace nanovllm {

// Views of the persistent inputs for one batch size b (what a captured forward reads).
struct DecodeGraphInputs {
  TensorView input_ids;     // [b] i32
  TensorView positions;     // [b] i32
  AttentionMetadata meta;   // decode: slot_mapping [b], context_lens [b], block_tables [b, W]
  TensorView logits;        // [b, V] f32 (rank 0's gathered logits; ignored on other ranks)
  TensorView sample_slots;  // [b] i32, each row's sampling slot, -1 on padded rows
  TensorView out_tokens;    // [b] i32, the sampled tokens (rank 0)
};

// What a replay leaves on the device for the live rows, valid until the next replay.
struct DecodeGraphOutputs {
  TensorView logits;      // [B, V] f32 (empty after a graph that samples from shards)
  TensorView out_tokens;  // [B] i32 (meaningful where the graph samples: rank 0)
};

class CudaGraphRunner {
 public:
  // 1, 2, 4, 8, then 16..512 in steps of 16, those <= max_num_seqs (ascending).
  static std::vector<int> graph_batch_sizes(int max_num_seqs);
  // The batch sizes that may have a short-context twin: up to 8 (the cluster merge fits up to
  // 33 (sequence, kv head) pairs on an H200: 8 sequences at 4 kv heads a rank).
  static constexpr int kShortContextMaxBatch = 8;
  // cluster_bound(b): the longest context at which a graph of b rows merges its attention inside
  // clusters, 0 where it never does (kernels::cuda::decode_cluster_context_bound for a rank's
  // heads).
  using ClusterBound = std::function<int(int)>;
  // Graphs a runner captures: every size in each form (two with sampling from shards), and the
  // short-context twins.
  static size_t graph_count(int max_num_seqs, int max_model_len, bool from_shards,
                            const ClusterBound& cluster_bound);
  // What the KV-cache budget reserves for `num_graphs` decode graphs of a rank of `tp_size`
  // running a model of `num_layers` layers (intermediates are in the workspace, so this is the
  // execs' own memory). Measured (the runner logs its figure beside this one): 36 graphs of
  // the 0.6B shape (28 layers) took 0.03 GiB at --tp 1 and 0.27 GiB a rank at --tp 2 (2 H100s,
  // NCCL 2.28); a default --tp 2/4 run on H200s took 0.34-0.35 GiB. NCCL's graph-captured
  // collectives cost per node, so the estimate grows with the all-reduces a graph holds (two
  // a layer, the embedding's and the LM head's gather) where the old flat 8 MiB a graph ran
  // short under tensor parallelism and every rank warned. all_reduces_in_kernels: the
  // all-reduces are the peer path's kernels (Communicator::all_reduce_in_kernels), so a graph
  // holds one NCCL node, the LM head's gather: 72 graphs (both forms, sampling from shards)
  // took 0.08-0.09 GiB a rank at --tp 2 and 4 on H200s where NCCL's allowance reserved 1.09.
  // Any set of graphs also pays a part that does not grow with its size (likely what CUDA loads
  // lazily for the decode-sized kernels, whose first launches are the capture's eager runs):
  // the examples' 7 graphs (batch 1..16) of the 0.6B took 0.07 GiB at --tp 1 on an H200,
  // 0.04 more than 4 MiB a graph reserved, and every such run warned (2026-11-29).
  static constexpr size_t kGraphSetBytesEstimate = size_t{64} << 20;         // once, any graphs
  static constexpr size_t kGraphBytesEstimate = size_t{4} << 20;             // a graph's own
  static constexpr size_t kCollectiveNodeBytesEstimate = size_t{160} << 10;  // per NCCL node
  static size_t graph_bytes_estimate(size_t num_graphs, int tp_size, int num_layers,
                                     bool all_reduces_in_kernels = false);

  // max_blocks_per_seq = ceil(max_model_len / block_size): a sequence of exactly
  // max_model_len fits. logits: [>= max batch, V] f32, the runner's persistent logits.
  CudaGraphRunner(std::vector<int> batch_sizes, int max_blocks_per_seq, int max_model_len,
                  const TensorView& logits, const ClusterBound& cluster_bound);
  ~CudaGraphRunner();
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  // forward(inputs, from_shards): the step with the logits gathered and sampled (false) or
  // sampled from shards (true).
  using Forward = std::function<void(const DecodeGraphInputs&, bool)>;
  // One eager run at the largest size and at the largest size our decode-size GEMMs take
  // (lazy initialisation outside any capture), then every size captured, largest first; with
  // from_shards, each size in both forms. library_next_at_start: the kernels of ours behind a
  // cuBLAS GEMM launch once its blocks have all begun (kernels/graph_launch_order.h).
  void capture(const Forward& forward, cudaStream_t stream, bool from_shards,
               bool library_next_at_start);

  int max_batch() const { return sizes_.back(); }
  // The edges capture moved to a cuBLAS kernel's launch-order port, over all graphs.
  int library_edges_moved() const { return library_edges_moved_; }
  int num_graphs() const {
    const auto captured = [](const std::vector<cudaGraphExec_t>& v) {
      return std::count_if(v.begin(), v.end(), [](cudaGraphExec_t e) { return e != nullptr; });
    };
    return static_cast<int>(captured(execs_) + captured(shard_execs_) + captured(short_execs_) +
                            captured(short_shard_execs_));
  }
  bool can_run(int64_t num_seqs) const { return num_seqs >= 1 && num_seqs <= max_batch(); }

  // Decode cmd on the smallest graph that holds its batch: fills the live rows, resets the
  // padded ones, replays. Pending inputs (async scheduling: kPendingInputToken) are taken from
  // last_tokens [N] i32 at the row's sampling slot on the device first
  // (kernels/pending_inputs.h); a command with some needs last_tokens.
  DecodeGraphOutputs replay(const StepCommand& cmd, cudaStream_t stream,
                            const TensorView& last_tokens = TensorView());

 private:
  // The inputs, one i32 array each, at these offsets (in elements) of both staging buffers;
  // the block tables last, so a batch of b copies one prefix of 5 * max_bs + b * width.
  enum Field : int { kIds, kPositions, kSlots, kContextLens, kSampleSlots, kBlockTables };
  int64_t offset(Field f) const { return static_cast<int64_t>(f) * sizes_.back(); }
  int32_t* host(Field f) const { return pinned_ + offset(f); }
  TensorView device(Field f, std::initializer_list<int64_t> dims) const;
  // The graph of sizes_[i]'s inputs; short_context: its twin's context bound instead of
  // max_model_len.
  DecodeGraphInputs inputs(size_t i, bool short_context = false) const;
  // The context bound of a twin of b rows, 0 for none: sizes up to kShortContextMaxBatch whose
  // cluster bound is positive and below max_model_len (a bound at or above it: the plain graph
  // merges in clusters already).
  static int twin_bound(int b, int max_model_len, const ClusterBound& cluster_bound);
  // Waits until the previous upload has left the pinned buffer (a worker rank never reads
  // its tokens back, so nothing else orders its replays with the host).
  void wait_staging();
  // Writes rows [0, n) of the host staging from the live rows, then padding up to b: ids 0,
  // position 0, slot -1 (no store), context 0 (no keys read), sample slot -1, table row -1.
  void stage_padding(int64_t n, int b);
  // One copy of rows [0, b) of every input (padding included), pinned host -> device.
  void upload(int b, cudaStream_t stream);

  std::vector<int> sizes_;                    // ascending
  std::vector<cudaGraphExec_t> execs_;        // parallel to sizes_
  std::vector<cudaGraphExec_t> shard_execs_;  // parallel to sizes_, or empty (from_shards)
  std::vector<int> twin_bounds_;              // parallel to sizes_: twin_bound() of each
  int library_edges_moved_ = 0;
  // The short-context twins, parallel to sizes_ (null where twin_bounds_ is 0), or empty;
  // short_shard_execs_ likewise, where there are shard graphs.
  std::vector<cudaGraphExec_t> short_execs_;
  std::vector<cudaGraphExec_t> short_shard_execs_;
  int width_, max_model_len_;
  TensorView logits_;
  // [5 * max_bs + max_bs * width_] i32 each: ids, positions, slot_mapping, context_lens,
  // sample_slots [max_bs] then block_tables [max_bs, width_] (Field).
  DeviceBuffer staged_;             // on the device, read by the graphs
  int32_t* pinned_ = nullptr;       // page-locked host twin (cudaHostAlloc), filled per replay
  cudaEvent_t uploaded_ = nullptr;  // after the last upload's copy
  DeviceBuffer out_tokens_;         // [max_bs] i32
};

}  // namespace nanovllm
