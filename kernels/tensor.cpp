#include "kernels/tensor.h"

#include <sstream>

namespace nanovllm {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBf16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kF32:
      return "f32";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kU16:
      return "u16";
    case DType::kFp8E4M3:
      return "fp8_e4m3";
    case DType::kI8:
      return "i8";
  }
  return "?";
}

TensorView::TensorView(void* ptr, DType t, std::initializer_list<int64_t> dims, Device dev)
    : data(ptr), dtype(t), device(dev), ndim(static_cast<int>(dims.size())) {
  CHECK_LE(ndim, kMaxDims);
  int i = 0;
  for (int64_t d : dims) shape[i++] = d;
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    stride[d] = s;
    s *= shape[d];
  }
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

TensorView TensorView::slice_rows(int64_t begin, int64_t end) const {
  CHECK_GE(ndim, 1);
  CHECK(0 <= begin && begin <= end && end <= shape[0]);
  TensorView v = *this;
  v.data = static_cast<char*>(data) + begin * stride[0] * static_cast<int64_t>(dtype_size(dtype));
  v.shape[0] = end - begin;
  return v;
}

TensorView TensorView::reshape(std::initializer_list<int64_t> dims) const {
  CHECK(is_contiguous());
  TensorView v(data, dtype, dims, device);
  CHECK_EQ(v.numel(), numel());
  return v;
}

std::string TensorView::shape_str() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << shape[d];
  os << "]";
  return os.str();
}

}  // namespace nanovllm
