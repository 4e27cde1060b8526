// Parameter::load on the CPU: the pieces the parallel layers describe (row ranges of several
// tensors, a column range, padding rows, F32/F16 conversion) land in the right place whatever
// the uploader's chunk and thread split, and tensor-parallel shards of a real checkpoint
// reassemble the whole tensor.
#include "layers/parameter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <numeric>

#include "layers/linear.h"
#include "layers/safetensors_writer.h"
#include "tests/layers/model_folder_test_util.h"
#include "tests/layers/parameter_test_util.h"

namespace nanovllm {
namespace {

using test::load_cases;

std::vector<uint16_t> host_bytes(const Parameter& p) {
  const TensorView& v = p.view();
  const auto* d = static_cast<const uint16_t*>(v.data);
  return std::vector<uint16_t>(d, d + v.numel());
}

TEST(ParameterLoad, StacksPiecesTakesColumnsConvertsAndZeroPadsForAnyChunkAndThreadSplit) {
  // null: the one-off uploader of hand-made tensors; the others put chunk and part edges
  // inside rows (64-byte chunks, parts of a chunk on 3 threads) or span many rows.
  WeightUploader one_thread(1), small_chunks(3, 64, 2, 0), odd_chunks(2, 192, 3, 0);
  for (WeightUploader* up :
       {static_cast<WeightUploader*>(nullptr), &one_thread, &small_chunks, &odd_chunks}) {
    for (const test::LoadCase& c : load_cases(up)) {
      SCOPED_TRACE(c.what);
      const Parameter p = Parameter::load(c.rows, c.col_begin, c.col_end, Device::kCpu);
      const std::vector<uint16_t> want = test::expected_image(c.rows, c.col_begin, c.col_end);
      int64_t rows = 0;
      for (const RowRange& r : c.rows) rows += r.end - r.begin;
      if (c.rows[0].tensor->shape.size() == 1) {
        EXPECT_EQ(p.view().ndim, 1);
      } else {
        ASSERT_EQ(p.view().ndim, 2);
        EXPECT_EQ(p.view().size(1), c.col_end - c.col_begin);
      }
      EXPECT_EQ(p.view().size(0), rows);
      EXPECT_EQ(host_bytes(p), want);
    }
  }
}

TEST(ParameterLoad, TensorParallelRowAndColumnShardsOfACheckpointReassembleTheTensor) {
  testing::TempDir dir;
  const int64_t rows = 16, cols = 24;
  std::vector<uint16_t> bf(rows * cols);
  std::vector<float> f32(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) {
    f32[i] = test::source_value(1, i);
    bf[i] = float_to_bf16(test::source_value(2, i));
  }
  write_safetensors(dir.path() / "model.safetensors",
                    {{{"w_bf16", DType::kBf16, {rows, cols}}, std::as_bytes(std::span(bf))},
                     {{"w_f32", DType::kF32, {rows, cols}}, std::as_bytes(std::span(f32))}});
  const Checkpoint ck = Checkpoint::open(dir.path());
  for (const char* name : {"w_bf16", "w_f32"}) {
    const CheckpointTensor& t = ck.tensor(name);
    EXPECT_NE(t.uploader, nullptr);  // the checkpoint's own staging
    const Parameter full = Parameter::load_full(t, Device::kCpu);
    const std::vector<uint16_t> whole = host_bytes(full);
    ASSERT_EQ(whole, test::expected_image({{&t, 0, rows}}, 0, cols));
    for (int tp : {1, 2, 4}) {
      SCOPED_TRACE(::testing::Message() << name << " tp " << tp);
      // Column-parallel: rank r holds rows [r * rows / tp, ...): stacked they are the tensor.
      std::vector<uint16_t> by_rows;
      for (int r = 0; r < tp; ++r) {
        const auto part =
            host_bytes(Parameter::load({even_rows(t, rows, r, tp)}, 0, cols, Device::kCpu));
        by_rows.insert(by_rows.end(), part.begin(), part.end());
      }
      EXPECT_EQ(by_rows, whole);
      // Row-parallel: rank r holds columns [r * cols / tp, ...) of every row.
      std::vector<uint16_t> by_cols(whole.size());
      const int64_t part_cols = cols / tp;
      for (int r = 0; r < tp; ++r) {
        const auto part = host_bytes(Parameter::load({RowRange{&t, 0, rows}}, r * part_cols,
                                                     (r + 1) * part_cols, Device::kCpu));
        for (int64_t i = 0; i < rows; ++i)
          std::copy_n(part.begin() + i * part_cols, part_cols,
                      by_cols.begin() + i * cols + r * part_cols);
      }
      EXPECT_EQ(by_cols, whole);
    }
  }
}

TEST(WeightUploader, FillCoversTheImageOnceInAlignedDisjointRanges) {
  for (const size_t nbytes : {size_t{1}, size_t{64}, size_t{1000}, size_t{4096 + 130}}) {
    WeightUploader up(4, 256, 2, 0);
    std::vector<std::byte> dst(nbytes, std::byte{0xEE});
    std::mutex mu;
    std::vector<std::pair<size_t, size_t>> calls;  // (offset, n)
    up.upload(dst.data(), nbytes, Device::kCpu, [&](std::byte* out, size_t offset, size_t n) {
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((offset + i) * 7 % 251);
      std::lock_guard lock(mu);
      calls.emplace_back(offset, n);
    });
    std::sort(calls.begin(), calls.end());
    size_t next = 0;
    for (const auto& [offset, n] : calls) {
      EXPECT_EQ(offset, next) << nbytes;
      EXPECT_EQ(offset % WeightUploader::kAlign, 0u) << nbytes;
      EXPECT_GT(n, 0u);
      next = offset + n;
    }
    EXPECT_EQ(next, nbytes);
    for (size_t i = 0; i < nbytes; ++i)
      ASSERT_EQ(dst[i], static_cast<std::byte>(i * 7 % 251)) << nbytes << " byte " << i;
  }
}

TEST(WeightUploader, AFailingFillPropagatesAndLeavesTheUploaderUsable) {
  WeightUploader up(2, 128, 2, 0);
  std::vector<std::byte> dst(1024);
  EXPECT_THROW(up.upload(dst.data(), dst.size(), Device::kCpu,
                         [](std::byte*, size_t offset, size_t) {
                           if (offset >= 512) throw std::runtime_error("bad tensor");
                         }),
               std::runtime_error);
  up.upload(dst.data(), dst.size(), Device::kCpu,
            [](std::byte* out, size_t, size_t n) { std::fill_n(out, n, std::byte{1}); });
  EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](std::byte b) { return b == std::byte{1}; }));
}

}  // namespace
}  // namespace nanovllm
