// Helpers for the Parameter::load tests: checkpoint tensors made by hand over owned bytes
// (any dtype, optionally misaligned as in a file written without header padding), the
// shapes of pieces the parallel layers ask for, and the image they must produce, computed
// element by element.
#pragma once

#include <bit>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "layers/parameter.h"
#include "layers/weight_uploader.h"

namespace nanovllm::test {

// Element i of the tensor tagged `tag`: k/8 for |k| <= 1000, exact in f16 and f32 (bf16
// rounds it: the expected image rounds the same way).
inline float source_value(int tag, int64_t i) {
  return static_cast<float>((tag * 7919 + i * 31) % 2001 - 1000) / 8.0f;
}

inline uint16_t f32_to_f16_exact(float f) {  // only for the values above (|f| <= 125, k/8)
  if (f == 0.0f) return 0;
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(sign | (exp << 10) | ((u >> 13) & 0x3ffu));
}

struct OwnedTensor {
  std::vector<std::byte> storage;
  CheckpointTensor t;
};

inline std::unique_ptr<OwnedTensor> make_tensor(const std::string& name, DType dtype,
                                                std::vector<int64_t> shape, int tag,
                                                WeightUploader* uploader, size_t misalign = 0) {
  auto o = std::make_unique<OwnedTensor>();
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t elem = dtype == DType::kF32 ? 4 : 2;
  o->storage.resize(misalign + static_cast<size_t>(n) * elem);
  std::byte* data = o->storage.data() + misalign;
  for (int64_t i = 0; i < n; ++i) {
    const float v = source_value(tag, i);
    if (dtype == DType::kF32) {
      std::memcpy(data + i * 4, &v, 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? f32_to_f16_exact(v) : float_to_bf16(v);
      std::memcpy(data + i * 2, &h, 2);
    }
  }
  o->t = CheckpointTensor{name,    dtype, std::move(shape), data, static_cast<size_t>(n) * elem,
                          uploader};
  return o;
}

// The [rows, cols] bf16 image Parameter::load must produce, one element at a time.
inline std::vector<uint16_t> expected_image(const std::vector<RowRange>& rows, int64_t col_begin,
                                            int64_t col_end) {
  std::vector<uint16_t> out;
  for (const RowRange& r : rows) {
    const CheckpointTensor& t = *r.tensor;
    const int64_t src_cols = t.shape.size() >= 2 ? t.shape[1] : 1;
    for (int64_t i = r.begin; i < r.end; ++i)
      for (int64_t c = col_begin; c < col_end; ++c) {
        if (i >= t.shape[0]) {
          out.push_back(0);
          continue;
        }
        const int64_t e = i * src_cols + c;
        uint16_t h = 0;
        float f = 0;
        switch (t.dtype) {
          case DType::kBf16:
            std::memcpy(&h, t.data + e * 2, 2);
            out.push_back(h);
            break;
          case DType::kF16:
            std::memcpy(&h, t.data + e * 2, 2);
            out.push_back(float_to_bf16(f16_to_float(h)));
            break;
          default:
            std::memcpy(&f, t.data + e * 4, 4);
            out.push_back(float_to_bf16(f));
            break;
        }
      }
  }
  return out;
}

// The pieces the parallel layers load, over tensors made with `uploader`: each case owns its
// tensors and names the rows and column range.
struct LoadCase {
  std::string what;
  std::vector<std::unique_ptr<OwnedTensor>> tensors;
  std::vector<RowRange> rows;
  int64_t col_begin = 0, col_end = 0;
};

inline std::vector<LoadCase> load_cases(WeightUploader* up) {
  std::vector<LoadCase> cases;
  auto add = [&](std::string what, int64_t c0, int64_t c1) -> LoadCase& {
    cases.push_back(LoadCase{std::move(what), {}, {}, c0, c1});
    return cases.back();
  };
  {  // QKVParallelLinear: three tensors' row ranges stacked, whole rows
    LoadCase& c = add("qkv pieces", 0, 40);
    c.tensors.push_back(make_tensor("q", DType::kBf16, {48, 40}, 1, up));
    c.tensors.push_back(make_tensor("k", DType::kBf16, {24, 40}, 2, up));
    c.tensors.push_back(make_tensor("v", DType::kBf16, {24, 40}, 3, up));
    c.rows = {{&c.tensors[0]->t, 8, 32}, {&c.tensors[1]->t, 0, 12}, {&c.tensors[2]->t, 12, 24}};
  }
  {  // RowParallelLinear: every row, one rank's columns
    LoadCase& c = add("column range", 24, 56);
    c.tensors.push_back(make_tensor("o", DType::kBf16, {37, 64}, 4, up));
    c.rows = {{&c.tensors[0]->t, 0, 37}};
  }
  {  // VocabParallelEmbedding's last shard: rows past the vocabulary are zeros
    LoadCase& c = add("vocab padding", 0, 24);
    c.tensors.push_back(make_tensor("embed", DType::kBf16, {50, 24}, 5, up));
    c.rows = {{&c.tensors[0]->t, 40, 60}};
  }
  {  // a whole shard of padding, an empty piece, then data again
    LoadCase& c = add("padding and empty pieces", 0, 8);
    c.tensors.push_back(make_tensor("a", DType::kBf16, {10, 8}, 6, up));
    c.tensors.push_back(make_tensor("b", DType::kBf16, {10, 8}, 7, up));
    c.rows = {{&c.tensors[0]->t, 10, 14}, {&c.tensors[1]->t, 3, 3}, {&c.tensors[1]->t, 2, 9}};
  }
  {  // F32 and F16 checkpoints are converted, column range included
    LoadCase& c = add("f32 and f16", 1, 30);
    c.tensors.push_back(make_tensor("f32", DType::kF32, {21, 33}, 8, up));
    c.tensors.push_back(make_tensor("f16", DType::kF16, {17, 33}, 9, up));
    c.rows = {{&c.tensors[0]->t, 2, 21}, {&c.tensors[1]->t, 0, 17}};
  }
  {  // a file without header padding: the tensor's bytes start at an odd address
    LoadCase& c = add("misaligned bf16", 0, 31);
    c.tensors.push_back(make_tensor("odd", DType::kBf16, {29, 31}, 10, up, 1));
    c.rows = {{&c.tensors[0]->t, 0, 29}};
  }
  {  // 1-D: biases of q, k, v stacked (F32), a norm weight
    LoadCase& c = add("1-D biases", 0, 1);
    c.tensors.push_back(make_tensor("qb", DType::kF32, {64}, 11, up, 2));
    c.tensors.push_back(make_tensor("kb", DType::kF32, {32}, 12, up));
    c.tensors.push_back(make_tensor("vb", DType::kBf16, {32}, 13, up));
    c.rows = {{&c.tensors[0]->t, 16, 48}, {&c.tensors[1]->t, 8, 16}, {&c.tensors[2]->t, 8, 16}};
  }
  {
    LoadCase& c = add("1-D norm weight", 0, 1);
    c.tensors.push_back(make_tensor("norm", DType::kBf16, {1000}, 14, up));
    c.rows = {{&c.tensors[0]->t, 0, 1000}};
  }
  return cases;
}

}  // namespace nanovllm::test
