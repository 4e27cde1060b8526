// The port between rank 0's engine and the model: "execute this step command". The engine
// builds the command (engine/step_builder.h); the worker's model runner implements the port;
// under tensor parallelism a broadcaster wraps the runner, writing each command to the ring
// before executing it locally (ipc/broadcast_step_executor.h). Tests use fakes.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "ipc/step_command.h"
#include "kernels/check.h"

namespace nanovllm {

class PhaseTimer;  // kernels/phase_timer.h

// Benchmark instrumentation of rank 0's runner (CUDA events on its stream), all optional:
// how long the last step kept the GPU busy and how long the GPU sat idle before it.
struct StepTiming {
  double gpu_ms = 0;  // the step's first GPU operation to its sampled tokens on the host
  double gap_ms = 0;  // the previous step's end to this step's start (0 for the first)
};
// Where the start-up went (seconds; 0 where a part did not run, e.g. no graphs on the CPU).
struct StartupTiming {
  double load_s = 0;           // weights read and uploaded
  double warmup_s = 0;         // warm-up step and KV-cache sizing/allocation
  double graph_capture_s = 0;  // decode CUDA graphs
  double nccl_setup_s = 0;     // --tp on CUDA: NCCL communicator joined and warmed up (first)
};

// Logprobs of chosen tokens, one row each (kernels/logprobs.h's outputs on the host).
struct LogprobRows {
  int width = 0;                    // top entries per row
  std::vector<float> logprob;       // [R] the chosen token's
  std::vector<int32_t> rank;        // [R]
  std::vector<int32_t> top_ids;     // [R, width], -1 past the row's count
  std::vector<float> top_logprobs;  // [R, width]
  size_t num_rows() const { return logprob.size(); }
};

// What one step gives back to the engine (rank 0; empty on ranks > 0).
struct StepResult {
  std::vector<int32_t> sampled_token_ids;  // [S] one per logits row
  // [S] rows when the command's sample_logprobs is set (rows whose slot has no logprobs hold
  // nothing meaningful), else none.
  LogprobRows sampled_logprobs;
  LogprobRows prompt_logprobs;  // [P] one per prompt_logprobs_indices row
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Runs the forward pass of a kPrefill or kDecode command and samples on rank 0; a kExit
  // command ends the workers' loops (a no-op for a local executor).
  virtual StepResult execute(const StepCommand& cmd) = 0;

  // Steps in flight (async scheduling, vLLM's --async-scheduling): launch() starts a kPrefill
  // or kDecode command and collect() returns the results of the oldest launched step, in
  // launch order, so that rank 0 can launch the next decode step before it has read this
  // one's tokens. By default launch() runs the step to the end (execute) and collect() hands
  // its result over; an executor that really overlaps (the CUDA model runner with its decode
  // graphs) keeps the device busy across the host's work between steps. At most
  // kMaxStepsInFlight steps are launched and not collected.
  static constexpr int kMaxStepsInFlight = 2;
  virtual void launch(const StepCommand& cmd) {
    CHECK_LT(static_cast<int>(launched_.size()), kMaxStepsInFlight);
    launched_.push_back(execute(cmd));
  }
  virtual StepResult collect() {
    CHECK(!launched_.empty());
    StepResult result = std::move(launched_.front());
    launched_.pop_front();
    return result;
  }
  // Whether a kDecode command of num_seqs rows may carry pending input ids
  // (StepCommand::kPendingInputToken: the token the step before it sampled for the row's
  // sampling slot, taken on the device), launched while that step is still in flight.
  virtual bool accepts_pending_inputs(int num_seqs) const {
    (void)num_seqs;
    return false;
  }
  // KV-cache blocks every rank allocated: the block manager's size.
  virtual int num_kv_blocks() const = 0;

  // Optional instrumentation for benchmarks; an executor without it keeps these defaults.
  // Turns the per-step timing on or off; false when the executor cannot time steps.
  virtual bool set_step_timing(bool on) { return !on; }
  // The last step's timing while it is on (after execute returned); nullopt otherwise.
  virtual std::optional<StepTiming> last_step_timing() const { return std::nullopt; }
  // Times the phases of each step into `timer` (null: off); steps run eagerly (no CUDA
  // graphs) while it is set. False when the executor cannot.
  virtual bool set_phase_timer(PhaseTimer* timer) { return timer == nullptr; }
  virtual std::optional<StartupTiming> startup_timing() const { return std::nullopt; }

 private:
  std::deque<StepResult> launched_;  // the default launch()'s results, oldest first
};

}  // namespace nanovllm
