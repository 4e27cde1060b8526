// A non-owning view of a strided tensor in host or device memory: what every kernel
// launcher takes. Owning buffers live with whoever allocates them (rank/, layers/).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/check.h"

namespace nanovllm {

// kFp8E4M3: OCP FP8 E4M3 (no infinities, max 448), the KV cache's --kv-cache-dtype fp8, whose
// rows carry a power-of-two scale exponent each (kI8). kI8 also names --kv-cache-dtype int8's
// cache, whose bytes hold levels in offset binary (q + 128: kernels/int8_kv.h).
enum class DType : uint8_t { kBf16, kF16, kF32, kI32, kI64, kU16, kFp8E4M3, kI8 };
enum class Device : uint8_t { kCpu, kCuda };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFp8E4M3:
    case DType::kI8:
      return 1;
    case DType::kBf16:
    case DType::kF16:
    case DType::kU16:
      return 2;
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
  }
  return 0;
}
const char* dtype_name(DType t);

struct TensorView {
  static constexpr int kMaxDims = 6;

  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> stride{};  // in elements, not bytes

  TensorView() = default;
  // Contiguous (row-major) view.
  TensorView(void* ptr, DType t, std::initializer_list<int64_t> dims, Device dev = Device::kCpu);

  int64_t size(int dim) const { return shape[dim < 0 ? dim + ndim : dim]; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;
  bool on_cpu() const { return device == Device::kCpu; }

  template <typename T>
  T* ptr() const {
    return static_cast<T*>(data);
  }

  // Rows [begin, end) of dim 0; shares storage.
  TensorView slice_rows(int64_t begin, int64_t end) const;
  // Same storage, new contiguous shape with the same element count.
  TensorView reshape(std::initializer_list<int64_t> dims) const;

  std::string shape_str() const;
};

}  // namespace nanovllm
