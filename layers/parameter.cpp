#include "layers/parameter.h"

#include <algorithm>
#include <cstring>

#include "kernels/bf16.h"
#include "layers/weight_uploader.h"

namespace nanovllm {

namespace {

// out [n] = elements [index, index + n) of a checkpoint tensor as BF16 bits.
void to_bf16(const std::byte* data, DType dtype, int64_t index, int64_t n, uint16_t* out) {
  switch (dtype) {
    case DType::kBf16:
      std::memcpy(out, data + index * 2, static_cast<size_t>(n) * 2);  // may be unaligned
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, data + (index + i) * 2, 2);
        out[i] = float_to_bf16(f16_to_float(v));
      }
      return;
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        float v;
        std::memcpy(&v, data + (index + i) * 4, 4);
        out[i] = float_to_bf16(v);
      }
      return;
    default:
      break;
  }
  CHECK_MSG(false, "weight dtype " << dtype_name(dtype) << " is not a float type");
}

int64_t cols_of(const CheckpointTensor& t) {
  return t.shape.size() >= 2 ? t.shape[1] : 1;
}

// out [count] = elements [first, first + count) of the parameter's row-major [rows, cols]
// image: the pieces' rows stacked, columns [col_begin, col_begin + cols) of each, rows past a
// tensor's end zero. Copies run as far as the source is contiguous (whole rows of one piece
// when the column range is the whole row).
void gather(const std::vector<RowRange>& pieces, int64_t col_begin, int64_t cols, int64_t first,
            int64_t count, uint16_t* out) {
  int64_t row = first / cols, col = first % cols;  // where out[0] lands in the image
  size_t p = 0;
  int64_t piece_row0 = 0;  // the image row of pieces[p]'s first row
  while (count > 0) {
    while (row >= piece_row0 + (pieces[p].end - pieces[p].begin)) {
      piece_row0 += pieces[p].end - pieces[p].begin;
      ++p;
      CHECK_LT(p, pieces.size());
    }
    const RowRange& r = pieces[p];
    const CheckpointTensor& t = *r.tensor;
    const int64_t src_rows = t.shape[0], src_cols = cols_of(t);
    const int64_t src_row = r.begin + (row - piece_row0);
    int64_t n = 0;
    if (src_row >= src_rows) {  // padding (vocab shards) to the end of the piece
      n = std::min(count, (r.end - src_row) * cols - col);
      std::fill_n(out, n, uint16_t{0});
    } else {
      const bool whole_rows = col_begin == 0 && cols == src_cols;
      const int64_t stored = std::min(r.end, src_rows) - src_row;  // rows left with data
      n = std::min(count, (whole_rows ? stored * cols : cols) - col);
      to_bf16(t.data, t.dtype, src_row * src_cols + col_begin + col, n, out);
    }
    out += n;
    count -= n;
    const int64_t next = row * cols + col + n;
    row = next / cols;
    col = next % cols;
  }
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
  const size_t bytes = static_cast<size_t>(total_rows * cols) * sizeof(uint16_t);
  Parameter p;
  p.buffer_ = DeviceBuffer(bytes, device);
  const WeightUploader::Fill fill = [&](std::byte* out, size_t offset, size_t n) {
    CHECK(offset % 2 == 0 && n % 2 == 0);
    gather(rows, col_begin, cols, static_cast<int64_t>(offset / 2), static_cast<int64_t>(n / 2),
           reinterpret_cast<uint16_t*>(out));
  };
  if (WeightUploader* up = rows[0].tensor->uploader; up != nullptr) {
    up->upload(p.buffer_.data(), bytes, device, fill);
  } else {  // a tensor made by hand, outside a Checkpoint: a one-off uploader, one chunk deep
    const size_t chunk =
        (std::min(bytes, WeightUploader::kDefaultChunkBytes) + WeightUploader::kAlign - 1) /
        WeightUploader::kAlign * WeightUploader::kAlign;
    WeightUploader once(1, std::max(chunk, WeightUploader::kAlign), 1);
    once.upload(p.buffer_.data(), bytes, device, fill);
  }  // (its destructor waits for the copy)
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
