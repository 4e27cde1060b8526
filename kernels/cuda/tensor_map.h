// TMA tensor maps (CUtensorMap) built on the host for the Hopper kernels, through the driver's
// cuTensorMapEncodeTiled found via the runtime (no libcuda link).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace nanovllm::kernels::cuda {

// A 3-D bf16 tensor [rows][heads][128] (strides in elements; the head dim contiguous) read in
// boxes of 64 columns x 1 head x box_rows rows with the 128-byte swizzle: each box lands as
// box_rows rows of 128 bytes, 8 rows to a 1024-byte swizzle atom. Rows outside [0, rows) read
// as zeros. `what` names the tensor in the error if the driver refuses it.
CUtensorMap swizzled_head_tile_map(const void* base, int64_t heads, int64_t rows,
                                   int64_t head_stride, int64_t row_stride, int box_rows,
                                   const char* what);

// A 2-D bf16 matrix [rows][cols] (row stride in elements, a multiple of 8; columns contiguous)
// read in boxes of 64 columns x box_rows rows (box_rows <= 256) with the 128-byte swizzle, laid
// out as above. Rows outside [0, rows) and columns outside [0, cols) read as zeros.
CUtensorMap swizzled_matrix_tile_map(const void* base, int64_t rows, int64_t cols,
                                     int64_t row_stride, int box_rows, const char* what);

}  // namespace nanovllm::kernels::cuda
