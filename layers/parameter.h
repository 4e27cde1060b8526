// A model weight on its device, loaded as BF16 from (a shard of) checkpoint tensors.
// Sharded layers describe their part as row ranges of one or more checkpoint tensors
// (stacked in order) and a column range shared by all of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/device_buffer.h"
#include "layers/checkpoint.h"

namespace nanovllm {

struct RowRange {
  const CheckpointTensor* tensor = nullptr;
  int64_t begin = 0;  // first row (dim 0)
  int64_t end = 0;    // one past the last row; rows past the tensor's end load as zeros
};

class Parameter {
 public:
  Parameter() = default;
  // rows: the pieces, stacked along dim 0; columns [col_begin, col_end) of each piece's
  // dim 1 (1-D tensors: col range [0, 1)). F32 and F16 are converted to BF16.
  // The bytes go through the checkpoint's WeightUploader: on CUDA the copy may still be in
  // flight on the legacy default stream when this returns (layers/weight_uploader.h).
  static Parameter load(const std::vector<RowRange>& rows, int64_t col_begin, int64_t col_end,
                        Device device);
  // The whole tensor.
  static Parameter load_full(const CheckpointTensor& t, Device device);

  // [rows] for 1-D sources, else [rows, cols].
  const TensorView& view() const { return view_; }
  bool empty() const { return buffer_.empty(); }

 private:
  DeviceBuffer buffer_;
  TensorView view_;
};

// The tensor `name` of the checkpoint, with a message naming the model folder if its
// rank differs from `ndim` (shapes were already validated by validate_checkpoint).
const CheckpointTensor& checkpoint_tensor(const Checkpoint& ckpt, const std::string& name,
                                          size_t ndim);

}  // namespace nanovllm
