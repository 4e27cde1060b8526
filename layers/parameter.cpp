#include "layers/parameter.h"

#include <cstring>

#include "kernels/bf16.h"

namespace nanovllm {

namespace {

// One element of a checkpoint tensor as BF16 bits.
uint16_t to_bf16(const std::byte* data, DType dtype, int64_t index) {
  switch (dtype) {
    case DType::kBf16: {
      uint16_t v;
      std::memcpy(&v, data + index * 2, 2);  // the mapping may be unaligned
      return v;
    }
    case DType::kF16: {
      uint16_t v;
      std::memcpy(&v, data + index * 2, 2);
      return float_to_bf16(f16_to_float(v));
    }
    case DType::kF32: {
      float v;
      std::memcpy(&v, data + index * 4, 4);
      return float_to_bf16(v);
    }
    default:
      break;
  }
  CHECK_MSG(false, "weight dtype " << dtype_name(dtype) << " is not a float type");
}

int64_t cols_of(const CheckpointTensor& t) {
  return t.shape.size() >= 2 ? t.shape[1] : 1;
}

}  // namespace

Parameter Parameter::load(const std::vector<RowRange>& rows, int64_t col_begin, int64_t col_end,
                          Device device) {
  CHECK(!rows.empty());
  CHECK_LT(col_begin, col_end);
  const bool one_d = rows[0].tensor->shape.size() == 1;
  int64_t total_rows = 0;
  for (const RowRange& r : rows) {
    CHECK(r.tensor != nullptr && r.begin <= r.end);
    CHECK_LE(col_end, cols_of(*r.tensor));
    total_rows += r.end - r.begin;
  }
  const int64_t cols = col_end - col_begin;
  std::vector<uint16_t> host(static_cast<size_t>(total_rows * cols), 0);  // [rows, cols] bf16
  int64_t out_row = 0;
  for (const RowRange& r : rows) {
    const int64_t src_rows = r.tensor->shape[0], src_cols = cols_of(*r.tensor);
    for (int64_t i = r.begin; i < r.end; ++i, ++out_row) {
      if (i >= src_rows) continue;            // padding rows (vocab shards) stay zero
      if (r.tensor->dtype == DType::kBf16) {  // fast path: a straight copy of the row segment
        std::memcpy(&host[out_row * cols], r.tensor->data + (i * src_cols + col_begin) * 2,
                    cols * 2);
        continue;
      }
      for (int64_t c = 0; c < cols; ++c)
        host[out_row * cols + c] =
            to_bf16(r.tensor->data, r.tensor->dtype, i * src_cols + col_begin + c);
    }
  }
  Parameter p;
  p.buffer_ = DeviceBuffer(host.size() * sizeof(uint16_t), device);
  p.buffer_.copy_from_host(host.data(), host.size() * sizeof(uint16_t));
  p.view_ = one_d ? p.buffer_.view(DType::kBf16, {total_rows})
                  : p.buffer_.view(DType::kBf16, {total_rows, cols});
  return p;
}

Parameter Parameter::load_full(const CheckpointTensor& t, Device device) {
  return load({RowRange{&t, 0, t.shape[0]}}, 0, cols_of(t), device);
}

const CheckpointTensor& checkpoint_tensor(const Checkpoint& ckpt, const std::string& name,
                                          size_t ndim) {
  const CheckpointTensor& t = ckpt.tensor(name);
  if (t.shape.size() != ndim)
    throw ModelFolderError(ckpt.dir().string() + ": tensor " + name + " has " +
                           std::to_string(t.shape.size()) + " dims, expected " +
                           std::to_string(ndim));
  return t;
}

}  // namespace nanovllm
