// Rank 0's sampled tokens on their way to the host while later steps run (async scheduling,
// ipc/step_executor.h's launch / collect): each step in flight copies its tokens into its own
// row of page-locked memory behind its forward pass, and its events mark its start and the
// copy's end, so the host waits only for the step it collects and a step's timing survives the
// launch of the next.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <vector>

#include "ipc/step_executor.h"
#include "kernels/tensor.h"

namespace nanovllm {

class TokenReadback {
 public:
  // Steps in flight, plus the last one collected (whose end the next step's gap is measured
  // from).
  static constexpr int kSlots = StepExecutor::kMaxStepsInFlight + 1;

  explicit TokenReadback(int64_t max_rows);
  ~TokenReadback();
  TokenReadback(const TokenReadback&) = delete;
  TokenReadback& operator=(const TokenReadback&) = delete;

  // A step starts on `stream`: its slot (the least recently used), its start event recorded.
  int begin(cudaStream_t stream);
  // The step's tokens [rows] i32 (device) are copied to the slot's host row; end recorded.
  void end(int slot, const TensorView& tokens, cudaStream_t stream);
  // Waits for the slot's copy and returns its `rows` tokens.
  std::vector<int32_t> wait(int slot, int64_t rows) const;
  // After wait: the step's GPU time (start to its tokens on the host) and its gap from the end
  // of the step in slot `previous` (-1: none, gap 0).
  StepTiming timing(int slot, int previous) const;

 private:
  int64_t max_rows_;
  int32_t* tokens_ = nullptr;  // [kSlots, max_rows] page-locked (cudaHostAlloc)
  std::array<cudaEvent_t, kSlots> start_{}, end_{};
  int next_ = 0;
};

}  // namespace nanovllm
