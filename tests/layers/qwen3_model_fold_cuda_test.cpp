// The Qwen3 model's folded form on CUDA (Qwen3DecoderLayer::folds: each RMSNorm inside the
// projection after it, each residual add inside the projection before it) against the unfolded
// form of the same model, for a prefill of few tokens and for batch-1 decode steps after it:
// the logits agree within the rounding the folded norm moves (kernels/skinny_gemm.h), and the
// last step's agree with the CPU model's, so both forms cannot be wrong together.
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "layers/checkpoint.h"
#include "layers/qwen3_model.h"
#include "tests/kernels/cuda_test_util.h"
#include "tests/layers/model_test_util.h"

namespace nanovllm {
namespace {

using test::DevVec;

constexpr int64_t kBlockSize = 16;
// One sequence in cache block 1 of 2 (not block 0, so a paging mistake shows).
const std::vector<int32_t> kIds{9707, 11, 1879, 42, 100, 7, 3, 25};
constexpr int64_t kPrompt = 5;  // prefill these, then decode the rest one token a step

class CudaModel {
 public:
  CudaModel(const test::TempModel& m, Device device)
      : c_(m.config()),
        ckpt_(Checkpoint::open(m.dir())),
        model_(c_, ckpt_, ShardInfo{0, 1, device}, comm_),
        cache_(2 * c_.num_hidden_layers * 2 * kBlockSize * c_.num_key_value_heads * c_.head_dim * 2,
               device),
        device_(device) {
    model_.bind_kv_cache(cache_.view(DType::kBf16, {2, c_.num_hidden_layers, 2, kBlockSize,
                                                    c_.num_key_value_heads, c_.head_dim}));
    if (device == Device::kCuda) {
      CUBLAS_CHECK(cublasCreate(&ctx_.cublas));
      model_.reserve_decode_scratch();
    }
    ctx_.cpu_threads = 2;
  }
  ~CudaModel() {
    if (ctx_.cublas) cublasDestroy(ctx_.cublas);
  }
  ExecContext& ctx() { return ctx_; }
  Qwen3ForCausalLM& model() { return model_; }

  // Logits [T, V] f32 of tokens kIds[first, first + t) at positions first.., each row's own.
  std::vector<float> step(int64_t first, int64_t t) {
    std::vector<int32_t> ids(kIds.begin() + first, kIds.begin() + first + t), pos(t), slots(t);
    for (int64_t i = 0; i < t; ++i) {
      pos[i] = static_cast<int32_t>(first + i);
      slots[i] = static_cast<int32_t>(kBlockSize + first + i);
    }
    const std::vector<int32_t> table{1}, cu_q{0, static_cast<int32_t>(t)},
        cu_k{0, static_cast<int32_t>(first + t)}, lens{static_cast<int32_t>(first + t)};
    AttentionMetadata meta;
    meta.is_prefill = first == 0;
    meta.slot_mapping = put(slots);
    meta.block_tables = put(table);
    meta.block_tables = meta.block_tables.reshape({1, 1});
    if (meta.is_prefill) {
      meta.cu_seqlens_q = put(cu_q);
      meta.cu_seqlens_k = put(cu_k);
      meta.max_seqlen_q = static_cast<int>(t);
      meta.max_seqlen_k = static_cast<int>(first + t);
    } else {
      meta.context_lens = put(lens);
      meta.max_context_len = static_cast<int>(first + t);
    }
    const TensorView hidden = model_.forward(put(ids), put(pos), meta, ctx_);
    DeviceBuffer logits(t * c_.vocab_size * sizeof(float), device_);
    model_.compute_logits(logits.view(DType::kF32, {t, c_.vocab_size}), hidden, TensorView(), ctx_);
    std::vector<float> out(t * c_.vocab_size);
    if (device_ == Device::kCuda) CUDA_CHECK(cudaDeviceSynchronize());
    logits.copy_to_host(out.data(), out.size() * sizeof(float));
    inputs_.clear();
    return out;
  }

 private:
  TensorView put(const std::vector<int32_t>& v) {
    inputs_.emplace_back(v.size() * sizeof(int32_t), device_);
    inputs_.back().copy_from_host(v.data(), v.size() * sizeof(int32_t));
    return inputs_.back().view(DType::kI32, {static_cast<int64_t>(v.size())});
  }

  ModelConfig c_;
  Checkpoint ckpt_;
  SingleRankCommunicator comm_;
  Qwen3ForCausalLM model_;
  DeviceBuffer cache_;
  Device device_;
  ExecContext ctx_;
  std::vector<DeviceBuffer> inputs_;  // this step's metadata
};

// The prefill's logits, then each decode step's, of one run.
std::vector<std::vector<float>> generate(CudaModel& m) {
  std::vector<std::vector<float>> out{m.step(0, kPrompt)};
  for (int64_t i = kPrompt; i < static_cast<int64_t>(kIds.size()); ++i) out.push_back(m.step(i, 1));
  return out;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

TEST(Qwen3ModelFoldCuda, FoldedStepsMatchTheUnfoldedAndTheCpuLogits) {
  SKIP_WITHOUT_CUDA();
  const test::TempModel tm("tiny-128");
  CudaModel m(tm, Device::kCuda);
  ASSERT_TRUE(m.model().folds(1, m.ctx()));
  ASSERT_TRUE(m.model().folds(kPrompt, m.ctx()));
  EXPECT_FALSE(m.model().folds(9, m.ctx()));  // past one MMA n-tile of tokens
  const std::vector<std::vector<float>> folded = generate(m);
  m.ctx().fold_norms = false;
  ASSERT_FALSE(m.model().folds(1, m.ctx()));
  const std::vector<std::vector<float>> unfolded = generate(m);
  ASSERT_EQ(folded.size(), unfolded.size());
  for (size_t i = 0; i < folded.size(); ++i) {
    const std::string what = i == 0 ? "prefill" : "decode step " + std::to_string(i);
    EXPECT_TRUE(std::all_of(folded[i].begin(), folded[i].end(), [](float v) {
      return std::isfinite(v);
    })) << what;
    // One bf16 rounding moved per norm, through 4 layers.
    EXPECT_LT(rel_l2(folded[i], unfolded[i]), 0.05) << what;
    EXPECT_NE(folded[i], unfolded[i]) << what << ": the fold was not taken";
  }

  // The last decode step against the CPU model's prefill of every token (its last row).
  CudaModel cpu(tm, Device::kCpu);
  EXPECT_FALSE(cpu.model().folds(1, cpu.ctx()));
  const std::vector<float> all = cpu.step(0, static_cast<int64_t>(kIds.size()));
  const size_t v = static_cast<size_t>(tm.config().vocab_size);
  const std::vector<float> want(all.end() - v, all.end());
  // bf16 activations through 4 layers on two different kernel sets.
  EXPECT_LT(rel_l2(folded.back(), want), 0.05);
  EXPECT_LT(rel_l2(unfolded.back(), want), 0.05);
}

}  // namespace
}  // namespace nanovllm
