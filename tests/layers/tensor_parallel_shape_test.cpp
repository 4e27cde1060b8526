// Which --tp sizes the Qwen3 shapes accept, that a refusal names the numbers, and that the
// kv head QKVParallelLinear loads on each rank is the one that rank's q heads read (GQA:
// q head h reads kv head h / (q_heads / kv_heads)), including the replicated case.
#include "layers/tensor_parallel_shape.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "layers/checkpoint.h"
#include "layers/linear.h"
#include "layers/model_presets.h"
#include "layers/safetensors_writer.h"

namespace nanovllm {
namespace {

std::string refusal(const ModelConfig& c, int tp) {
  try {
    check_tensor_parallel_shape(c, tp);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(TensorParallelShape, Qwen3SixHundredMillionSplitsOverPowersOfTwoUpToItsQHeads) {
  const ModelConfig& c = model_preset("qwen3-0.6b");  // 16 q / 8 kv heads, intermediate 3072
  for (int tp : {1, 2, 4, 8, 16}) EXPECT_EQ(refusal(c, tp), "") << "tp " << tp;
  const std::string three = refusal(c, 3);
  EXPECT_NE(three.find("16 attention (q) heads do not split evenly over 3 ranks"),
            std::string::npos)
      << three;
  EXPECT_NE(three.find("--tp 3"), std::string::npos) << three;
  EXPECT_NE(refusal(c, 32).find("16 attention (q) heads"), std::string::npos);
}

TEST(TensorParallelShape, Qwen3EightBillionReplicatesKvHeadsPastEightRanks) {
  const ModelConfig& c = model_preset("qwen3-8b");  // 32 q / 8 kv heads, intermediate 12288
  for (int tp : {1, 2, 4, 8, 16, 32}) EXPECT_EQ(refusal(c, tp), "") << "tp " << tp;
  EXPECT_NE(refusal(c, 3).find("32 attention (q) heads"), std::string::npos);
  EXPECT_NE(refusal(c, 64).find("over 64 ranks"), std::string::npos);
}

// The 8-GPU shapes: 40 q heads (14B) split over 8 ranks but not 16; 64 (32B) over up to 64
// ranks as far as q heads go, 8 kv heads replicated past 8.
TEST(TensorParallelShape, FourteenAndThirtyTwoBillionSplitOverEightRanks) {
  const ModelConfig& b14 = model_preset("qwen3-14b");
  for (int tp : {1, 2, 4, 8}) EXPECT_EQ(refusal(b14, tp), "") << "14b tp " << tp;
  EXPECT_NE(refusal(b14, 16).find("40 attention (q) heads"), std::string::npos);
  const ModelConfig& b32 = model_preset("qwen3-32b");
  for (int tp : {1, 2, 4, 8, 16}) EXPECT_EQ(refusal(b32, tp), "") << "32b tp " << tp;
}

TEST(TensorParallelShape, KvHeadsIntermediateAndVocabularyRulesNameTheirNumbers) {
  ModelConfig c = model_preset("qwen3-0.6b");
  c.num_attention_heads = 24;
  c.num_key_value_heads = 6;
  EXPECT_NE(refusal(c, 4).find("6 kv heads do not split evenly over 4 ranks"), std::string::npos);
  c.num_key_value_heads = 4;  // 24 q heads over 6 ranks, but 6 ranks share 4 kv heads unevenly
  EXPECT_NE(refusal(c, 6).find("6 ranks are not a multiple of the 4 kv heads"), std::string::npos);
  c.num_key_value_heads = 5;  // q heads must group evenly over kv heads at all
  EXPECT_NE(refusal(c, 1).find("24 q heads do not group evenly over 5 kv heads"),
            std::string::npos);

  c = model_preset("qwen3-0.6b");
  c.intermediate_size = 3000;
  EXPECT_NE(refusal(c, 16).find("intermediate_size 3000 does not split evenly over 16 ranks"),
            std::string::npos);
  EXPECT_EQ(refusal(c, 8), "");  // 3000 = 8 * 375

  c = model_preset("qwen3-0.6b");
  c.vocab_size = 151937;  // odd: the vocab-parallel embedding pads, no divisibility needed
  EXPECT_EQ(refusal(c, 16), "");
  EXPECT_NE(refusal(c, 0).find("at least 1"), std::string::npos);
}

// A checkpoint with only layer 0's q/k/v projections, every row holding its head's number
// (q: h, k: 100 + h, v: 200 + h; exact in bf16), head_dim 2 and 2 input features.
class QkvHeadLayout : public ::testing::Test {
 protected:
  static constexpr int64_t kDim = 2, kIn = 2;

  void write(int64_t q_heads, int64_t kv_heads) {
    TearDown();  // one folder at a time
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() / ("nanovllm_tp_shape_" + std::to_string(rd()));
    std::filesystem::create_directories(dir_);
    auto rows = [](int64_t heads, int base) {  // [heads * kDim, kIn] bf16
      std::vector<uint16_t> v;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < kDim * kIn; ++i) v.push_back(float_to_bf16(float(base + h)));
      return v;
    };
    q_ = rows(q_heads, 0), k_ = rows(kv_heads, 100), v_ = rows(kv_heads, 200);
    auto blob = [](const std::string& proj, const std::vector<uint16_t>& d, int64_t heads) {
      return SafetensorsBlob{
          {"model.layers.0.self_attn." + proj + ".weight", DType::kBf16, {heads * kDim, kIn}},
          std::as_bytes(std::span(d))};
    };
    write_safetensors(
        dir_ / "model.safetensors",
        {blob("q_proj", q_, q_heads), blob("k_proj", k_, kv_heads), blob("v_proj", v_, kv_heads)});
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // Every rank's q heads read kv heads that the same rank loaded; q heads are covered once.
  void expect_layout(int64_t q_heads, int64_t kv_heads, int tp) {
    write(q_heads, kv_heads);
    const Checkpoint ckpt = Checkpoint::open(dir_);
    std::multiset<int64_t> all_q;
    for (int rank = 0; rank < tp; ++rank) {
      const QKVParallelLinear qkv(ckpt, "model.layers.0.self_attn", q_heads, kv_heads, kDim, false,
                                  ShardInfo{rank, tp, Device::kCpu});
      const TensorView& w = qkv.weight();  // [(nq + 2 nkv) * kDim, kIn]
      const int64_t nq = qkv.num_heads(), nkv = qkv.num_kv_heads();
      ASSERT_EQ(w.size(0), (nq + 2 * nkv) * kDim);
      auto head_at = [&](int64_t slot) {
        return int64_t(bf16_to_float(w.ptr<uint16_t>()[slot * kDim * kIn]));
      };
      std::set<int64_t> kv_loaded;
      for (int64_t j = 0; j < nkv; ++j) {
        const int64_t k = head_at(nq + j) - 100, v = head_at(nq + nkv + j) - 200;
        EXPECT_EQ(k, v) << "rank " << rank << ": k and v heads differ";
        kv_loaded.insert(k);
      }
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t h = head_at(i);
        all_q.insert(h);
        EXPECT_TRUE(kv_loaded.count(h / (q_heads / kv_heads)))
            << "tp " << tp << " rank " << rank << ": q head " << h << " reads kv head "
            << h / (q_heads / kv_heads) << ", which this rank did not load";
      }
    }
    EXPECT_EQ(all_q.size(), size_t(q_heads));
    EXPECT_EQ(std::set<int64_t>(all_q.begin(), all_q.end()).size(), size_t(q_heads));
  }

  std::filesystem::path dir_;
  std::vector<uint16_t> q_, k_, v_;
};

TEST_F(QkvHeadLayout, QwenSixHundredMillionShapesLoadTheKvHeadTheirQHeadsRead) {
  for (int tp : {1, 2, 4, 8, 16}) expect_layout(16, 8, tp);
}

TEST_F(QkvHeadLayout, QwenEightBillionShapesLoadTheKvHeadTheirQHeadsRead) {
  for (int tp : {1, 2, 4, 8, 16, 32}) expect_layout(32, 8, tp);
}

TEST_F(QkvHeadLayout, TheLayerRefusesWhatTheShapeCheckRefuses) {
  write(16, 8);
  const Checkpoint ckpt = Checkpoint::open(dir_);
  ModelConfig c = model_preset("qwen3-0.6b");
  for (int tp : {3, 32}) {
    EXPECT_NE(refusal(c, tp), "");
    EXPECT_THROW(QKVParallelLinear(ckpt, "model.layers.0.self_attn", 16, 8, kDim, false,
                                   ShardInfo{0, tp, Device::kCpu}),
                 CheckError)
        << "tp " << tp;
  }
}

}  // namespace
}  // namespace nanovllm
