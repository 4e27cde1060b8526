#include "kernels/rms_norm.h"

#include <cmath>

#include "kernels/cpu/cpu_util.h"

namespace nanovllm::kernels::cpu {

namespace {

void check_rows(const TensorView& t, const TensorView& weight) {
  CHECK(t.dtype == DType::kBf16 && t.ndim == 2 && t.stride[1] == 1);
  CHECK_EQ(t.size(1), weight.size(0));
}

// dst[i] = bf16(src[i] * inv_rms * w[i]); src: [H] f32.
void normalize_row(uint16_t* dst, const float* src, const uint16_t* w, int64_t h, float eps) {
  float sum_sq = 0.0f;
  for (int64_t i = 0; i < h; ++i) sum_sq += src[i] * src[i];
  const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(h) + eps);
  for (int64_t i = 0; i < h; ++i) dst[i] = float_to_bf16(src[i] * inv_rms * bf16_to_float(w[i]));
}

}  // namespace

void rms_norm(const TensorView& out, const TensorView& x, const TensorView& weight, float eps) {
  check_rows(out, weight);
  check_rows(x, weight);
  CHECK_EQ(out.size(0), x.size(0));
  const int64_t h = x.size(1);
  std::vector<float> row(static_cast<size_t>(h));  // [H] f32
  for (int64_t t = 0; t < x.size(0); ++t) {
    const uint16_t* src = elem<uint16_t>(x, t);
    for (int64_t i = 0; i < h; ++i) row[i] = bf16_to_float(src[i]);
    normalize_row(elem<uint16_t>(out, t), row.data(), weight.ptr<uint16_t>(), h, eps);
  }
}

void fused_add_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight,
                        float eps) {
  check_rows(x, weight);
  check_rows(residual, weight);
  CHECK_EQ(residual.size(0), x.size(0));
  const int64_t h = x.size(1);
  std::vector<float> row(static_cast<size_t>(h));  // [H] f32, the bf16-rounded sum
  for (int64_t t = 0; t < x.size(0); ++t) {
    uint16_t* xs = elem<uint16_t>(x, t);
    uint16_t* res = elem<uint16_t>(residual, t);
    for (int64_t i = 0; i < h; ++i) {
      res[i] = float_to_bf16(bf16_to_float(xs[i]) + bf16_to_float(res[i]));
      row[i] = bf16_to_float(res[i]);
    }
    normalize_row(xs, row.data(), weight.ptr<uint16_t>(), h, eps);
  }
}

}  // namespace nanovllm::kernels::cpu
