#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "kernels/check.h"
#include "kernels/cuda/driver_entry.h"
#include "kernels/cuda/tensor_map.h"

namespace nanovllm::kernels::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto fn = driver_entry<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
  return fn;
}

}  // namespace

CUtensorMap swizzled_head_tile_map(const void* base, int64_t heads, int64_t rows,
                                   int64_t head_stride, int64_t row_stride, int box_rows,
                                   const char* what) {
  constexpr int64_t kHeadDim = 128;
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(kHeadDim), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(head_stride * 2),  // bytes
                                 static_cast<cuuint64_t>(row_stride * 2)};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult r = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  CHECK_MSG(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled(" << what << ", " << heads << " heads x "
                                                         << rows << " rows, box " << box_rows
                                                         << ") failed with CUresult " << r);
  return map;
}

CUtensorMap swizzled_matrix_tile_map(const void* base, int64_t rows, int64_t cols,
                                     int64_t row_stride, int box_rows, const char* what) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_stride * 2)};  // bytes
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  CHECK_MSG(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled(" << what << ", " << rows << " x " << cols
                                                         << ", row stride " << row_stride
                                                         << ", box " << box_rows
                                                         << ") failed with CUresult " << r);
  return map;
}

}  // namespace nanovllm::kernels::cuda
