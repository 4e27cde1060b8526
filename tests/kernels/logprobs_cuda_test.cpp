// kernels/logprobs.h on the device against the CPU reference: logprobs within 1e-4, the same
// ranks and top ids, the same rows skipped; at Qwen3's vocabulary, with ties, NaN and
// infinities, strided and unaligned rows, and vocabularies smaller than the lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/logprobs.h"
#include "tests/kernels/cuda_test_util.h"

namespace nanovllm::test {
namespace {

constexpr int64_t kVocab = 151936;
constexpr int64_t kWidth = 24;  // top list width, > kMaxLogprobs on purpose
constexpr int32_t kUnwritten = -5;
constexpr float kUnwrittenLogprob = 99.0f;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

struct Case {
  int64_t vocab = kVocab, ld = kVocab;
  int64_t offset = 0;         // elements before row 0 (1: rows that are not 16-byte aligned)
  std::vector<float> logits;  // [offset + R * ld]
  std::vector<int32_t> targets, num_top, index;  // [R], [M], [R] (empty: identity)
  int64_t rows() const { return static_cast<int64_t>(targets.size()); }
  float* row(int64_t r) { return logits.data() + offset + r * ld; }
  void fill_normal(uint32_t seed, float sigma = 3.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    logits.resize(static_cast<size_t>(offset + rows() * ld));
    for (float& x : logits) x = d(rng);
  }
};

struct Out {
  std::vector<float> logprob, top_logprobs;  // [R], [R, kWidth]
  std::vector<int32_t> rank, top_ids;        // [R], [R, kWidth]
};

// The batch over one call's buffers (host or device).
kernels::LogprobsBatch batch_of(const Case& c, Device dev, void* logits, void* targets,
                                void* num_top, void* index, void* logprob, void* rank, void* ids,
                                void* top_logprobs) {
  const int64_t r = c.rows(), m = static_cast<int64_t>(c.num_top.size());
  TensorView x(static_cast<float*>(logits) + c.offset, DType::kF32, {r, c.ld}, dev);
  x.shape[1] = c.vocab;  // rows strided by ld
  return {x,
          TensorView(targets, DType::kI32, {r}, dev),
          TensorView(num_top, DType::kI32, {m}, dev),
          c.index.empty() ? TensorView() : TensorView(index, DType::kI32, {r}, dev),
          TensorView(logprob, DType::kF32, {r}, dev),
          TensorView(rank, DType::kI32, {r}, dev),
          TensorView(ids, DType::kI32, {r, kWidth}, dev),
          TensorView(top_logprobs, DType::kF32, {r, kWidth}, dev)};
}

Out unwritten(int64_t r) {
  return {std::vector<float>(r, kUnwrittenLogprob),
          std::vector<float>(r * kWidth, kUnwrittenLogprob), std::vector<int32_t>(r, kUnwritten),
          std::vector<int32_t>(r * kWidth, kUnwritten)};
}

Out run_cpu(Case c) {
  Out o = unwritten(c.rows());
  kernels::cpu::token_logprobs(batch_of(c, Device::kCpu, c.logits.data(), c.targets.data(),
                                        c.num_top.data(), c.index.data(), o.logprob.data(),
                                        o.rank.data(), o.top_ids.data(), o.top_logprobs.data()));
  return o;
}

Out run_cuda(const Case& c) {
  const Out init = unwritten(c.rows());
  DevVec<float> logits(c.logits), logprob(init.logprob), top_logprobs(init.top_logprobs);
  DevVec<int32_t> targets(c.targets), num_top(c.num_top),
      index(c.index.empty() ? std::vector<int32_t>{0} : c.index), rank(init.rank),
      ids(init.top_ids);
  kernels::cuda::token_logprobs(batch_of(c, Device::kCuda, logits.mem.get(), targets.mem.get(),
                                         num_top.mem.get(), index.mem.get(), logprob.mem.get(),
                                         rank.mem.get(), ids.mem.get(), top_logprobs.mem.get()),
                                nullptr);
  CUDA_CHECK(cudaGetLastError());
  return {logprob.host(), top_logprobs.host(), rank.host(), ids.host()};
}

// Returns the number of rows written.
int expect_same_as_cpu(const Case& c) {
  const Out want = run_cpu(c), got = run_cuda(c);
  int written = 0;
  for (int64_t r = 0; r < c.rows(); ++r) {
    const std::string where =
        "row " + std::to_string(r) + " target " + std::to_string(c.targets[r]);
    EXPECT_EQ(got.rank[r], want.rank[r]) << where;
    if (want.rank[r] == kUnwritten) {
      EXPECT_EQ(got.logprob[r], kUnwrittenLogprob) << where;
      EXPECT_EQ(got.top_ids[r * kWidth], kUnwritten) << where;
      continue;
    }
    ++written;
    if (std::isfinite(want.logprob[r]))
      EXPECT_NEAR(got.logprob[r], want.logprob[r], 1e-4) << where;
    else
      EXPECT_EQ(got.logprob[r], want.logprob[r]) << where;
    for (int64_t j = 0; j < kWidth; ++j) {
      const int64_t i = r * kWidth + j;
      EXPECT_EQ(got.top_ids[i], want.top_ids[i]) << where << " entry " << j;
      if (std::isfinite(want.top_logprobs[i]))
        EXPECT_NEAR(got.top_logprobs[i], want.top_logprobs[i], 1e-4) << where << " entry " << j;
      else
        EXPECT_EQ(got.top_logprobs[i], want.top_logprobs[i]) << where << " entry " << j;
    }
  }
  return written;
}

TEST(LogprobsCuda, Qwen3VocabularyRowsMatchCpuForEveryCount) {
  SKIP_WITHOUT_CUDA();
  Case c;
  c.num_top = {-1, 0, 1, 5, 20, 3};
  // Rows of slots 0..5 and padding (-1); targets across the row and outside it.
  c.index = {0, 1, 2, 3, 4, 5, -1, 4, 3, 2, 4, 1};
  c.targets = {7, 150000, 0, 42, 151935, 1000, 5, -1, 151936, 77, 12345, 3};
  c.fill_normal(1);
  EXPECT_EQ(expect_same_as_cpu(c), 8);
  // The argmax as target: rank 1.
  const int64_t r = 4;
  c.targets[r] = static_cast<int32_t>(std::max_element(c.row(r), c.row(r) + c.vocab) - c.row(r));
  EXPECT_EQ(run_cuda(c).rank[r], 1);
}

TEST(LogprobsCuda, TiesNanAndInfinitiesMatchCpu) {
  SKIP_WITHOUT_CUDA();
  Case c;
  c.num_top = {20, 20, 20, 5, 20};
  c.targets = {0, 1, 2, 3, 4};
  c.fill_normal(2);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> level(-8, 8);
  std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
  // Row 0: logits on a grid of 17 values (ties everywhere, the ids decide the lists).
  for (int64_t v = 0; v < kVocab; ++v) c.row(0)[v] = 0.5f * static_cast<float>(level(rng));
  // Row 1: NaN and -inf sprinkled, +-0 at the top.
  for (int i = 0; i < 5000; ++i) c.row(1)[id(rng)] = i % 2 ? kNan : -kInf;
  for (int i = 0; i < 30; ++i) c.row(1)[id(rng)] = i % 2 ? 0.0f : -0.0f;
  std::transform(c.row(1), c.row(1) + kVocab, c.row(1), [](float x) { return x > 0.0f ? -x : x; });
  // Row 2: all -inf but 3 tokens: the lists end in -inf entries.
  std::fill(c.row(2), c.row(2) + kVocab, -kInf);
  c.row(2)[2] = 1.0f;
  c.row(2)[90000] = 2.0f;
  c.row(2)[151935] = 1.0f;
  // Row 3: a +inf logit (no part in lse) and a target at -inf.
  c.row(3)[500] = kInf;
  c.row(3)[3] = -kInf;
  // Row 4: every logit equal.
  std::fill(c.row(4), c.row(4) + kVocab, 0.25f);
  EXPECT_EQ(expect_same_as_cpu(c), 5);
}

TEST(LogprobsCuda, StridedUnalignedRowsAndSmallVocabulariesMatchCpu) {
  SKIP_WITHOUT_CUDA();
  for (auto [vocab, ld, offset] : {std::tuple<int64_t, int64_t, int64_t>{kVocab, kVocab + 13, 0},
                                   {kVocab, kVocab, 1},
                                   {1003, 1024, 3},
                                   {20, 20, 0},
                                   {7, 9, 1},
                                   {1, 1, 0}}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab) + " ld " + std::to_string(ld) + " offset " +
                 std::to_string(offset));
    Case c;
    c.vocab = vocab;
    c.ld = ld;
    c.offset = offset;
    c.num_top = {20, 5, 0};
    c.targets = {0, static_cast<int32_t>(vocab - 1), static_cast<int32_t>(vocab / 2)};
    c.fill_normal(4);
    for (int64_t r = 0; r < 3; ++r) std::fill(c.row(r) + vocab, c.row(r) + ld, 1e4f);  // unread
    EXPECT_EQ(expect_same_as_cpu(c), 3);
  }
}

TEST(LogprobsCuda, EveryBlocksPerRowChoiceMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  // Few rows split over clusters of up to 8 blocks (H100 / H200: 8 at 1, 4 at 30, 2 at 70, one
  // block per row at 200); the shares' lists and sums meet in the leader.
  for (int64_t rows : {1, 30, 70, 200}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    Case c;
    c.num_top = {20, 5, 0, 1};
    for (int64_t r = 0; r < rows; ++r) {
      c.index.push_back(static_cast<int32_t>(r % 4));
      c.targets.push_back(static_cast<int32_t>((r * 7919) % kVocab));
    }
    c.fill_normal(5 + static_cast<uint32_t>(rows));
    EXPECT_EQ(expect_same_as_cpu(c), rows);
  }
}

TEST(LogprobsCuda, RowsPastTheGridLimitMatchCpu) {
  SKIP_WITHOUT_CUDA();
  // More rows than one launch's grid holds (65535), with and without num_top_index.
  for (bool indexed : {true, false}) {
    SCOPED_TRACE(indexed ? "indexed" : "one count per row");
    Case c;
    c.vocab = c.ld = 5;
    const int64_t rows = 70000;
    for (int64_t r = 0; r < rows; ++r) {
      c.targets.push_back(static_cast<int32_t>(r % 6) - 1);  // -1 every sixth row: skipped
      if (indexed) c.index.push_back(static_cast<int32_t>(r % 3));
      if (!indexed) c.num_top.push_back(static_cast<int32_t>(r % 4) * 2 - 1);  // -1, 1, 3, 5
    }
    if (indexed) c.num_top = {2, -1, 5};
    c.fill_normal(6);
    EXPECT_GT(expect_same_as_cpu(c), rows / 3);
  }
}

}  // namespace
}  // namespace nanovllm::test
