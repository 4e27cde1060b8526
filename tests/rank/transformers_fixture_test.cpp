// Our CPU model against Hugging Face transformers on the same weights: the committed
// fixtures tests/fixtures/model/{tiny,tiny-128}.json were made by
// scripts/make_reference_fixtures.py (transformers, FP32, eager attention, on a GPU) for the
// folders `nanovllm-mkmodel --preset P --seed 1` writes. Each test writes that folder again
// with the same function and options as mkmodel and checks, per prompt:
//  - teacher forcing: our log-softmax at every position has the fixture's top-1 token, its
//    top-5 tokens' logprobs within kLogprobTolerance, and the same top-5 set wherever our
//    5th/6th gap leaves no room for a swap;
//  - greedy: 32 tokens through LLMEngine + ModelRunner equal the fixture's;
//  - attention matters: changing token 1 moves the last position's logprobs by >= 8x the
//    typical (mean) deviation in the fixture, and by the same amount in our model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "engine/llm_engine.h"
#include "engine/sampling_slots.h"
#include "engine/step_builder.h"
#include "layers/model_presets.h"
#include "layers/model_writer.h"
#include "rank/model_runner.h"

namespace nanovllm {
namespace {

// Tolerances, from measured error sources. Transformers ran in FP32; we keep activations in
// bf16 between ops (residual stream, norms, q/k/v, attention output, MLP), and each rounding
// moves the hidden state by up to 2^-9 relative. The logits are large here (embeddings have
// std 1: the top logit is ~hidden size, the rest of the top-5 sits 20..90 nats lower), so a
// 0.2% turn of the hidden state moves a logprob by ~0.5 nat. Measured over both presets'
// 2 x 2760 teacher-forced top-5 entries: |ours - transformers| mean 0.31 / 0.33 nats, RMS
// 0.46, p99 1.46, max 2.17 / 2.52 (flat in |logprob| beyond 10 nats, ~0 for the top-1 token
// whose logprob is ~0); the mean over one prompt is at most 0.36.
constexpr double kLogprobTolerance = 3.0;       // any single entry (max 2.52 measured)
constexpr double kMeanLogprobTolerance = 0.45;  // mean over one prompt's entries (max 0.36)
// The perturbation effect (max |change| of the last position's top-5 logprobs when token 1
// changes) is a difference of two noisy logprobs: measured |ours - transformers| <= 1.40.
constexpr double kShiftTolerance = 1.8;
// The fixture's smallest perturbation effect is 3.98 nats (tiny, len200): 11x the mean bf16
// deviation but only 1.6x the worst single one, so no honest per-entry tolerance is 10x below
// it. The yardstick is the typical (mean) deviation: every effect must be >= 8x
// kMeanLogprobTolerance (3.6 nats) and >= 2x kShiftTolerance, so a model whose last position
// ignores earlier tokens (effect 0) fails the shift comparison.
constexpr double kPerturbationRatio = 8.0;

constexpr int kBlockSize = 16;
constexpr int kNumBlocks = 64;  // 1024 tokens: the longest prompt (200) + 32, twice over
constexpr int kThreads = 2;

struct TopEntry {
  int32_t token;
  double logprob;
};

struct FixturePrompt {
  std::string name;
  std::vector<int32_t> ids;
  std::vector<std::vector<TopEntry>> teacher_forced_top5;  // [len][5]
  std::vector<int32_t> greedy_tokens;                      // [32]
  bool has_perturbed = false;
  std::vector<int32_t> perturbed_ids;
  std::vector<TopEntry> perturbed_last_top5;
  double perturbed_max_abs_change = 0.0;
};

std::vector<TopEntry> top_entries(const nlohmann::json& row) {
  std::vector<TopEntry> out;
  for (const auto& e : row) out.push_back({e.at(0).get<int32_t>(), e.at(1).get<double>()});
  return out;
}

struct Fixture {
  std::string preset;
  uint64_t seed = 0;
  std::vector<FixturePrompt> prompts;
};

Fixture load_fixture(const std::string& preset) {
  const std::string path =
      std::string(NANOVLLM_SOURCE_DIR) + "/tests/fixtures/model/" + preset + ".json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  const nlohmann::json j = nlohmann::json::parse(in);
  Fixture f;
  f.preset = j.at("mkmodel").at("preset").get<std::string>();
  f.seed = j.at("mkmodel").at("seed").get<uint64_t>();
  for (const auto& p : j.at("prompts")) {
    FixturePrompt fp;
    fp.name = p.at("name").get<std::string>();
    fp.ids = p.at("prompt_token_ids").get<std::vector<int32_t>>();
    for (const auto& row : p.at("teacher_forced_top5"))
      fp.teacher_forced_top5.push_back(top_entries(row));
    for (const auto& s : p.at("greedy")) fp.greedy_tokens.push_back(s.at("token").get<int32_t>());
    if (p.contains("perturbed")) {
      const auto& q = p.at("perturbed");
      fp.has_perturbed = true;
      fp.perturbed_ids = q.at("prompt_token_ids").get<std::vector<int32_t>>();
      fp.perturbed_last_top5 = top_entries(q.at("last_top5"));
      fp.perturbed_max_abs_change = q.at("max_abs_logprob_change").get<double>();
    }
    f.prompts.push_back(std::move(fp));
  }
  return f;
}

// The fixture's model folder, written as `nanovllm-mkmodel --preset P --seed S` writes it
// (same function, same options: its defaults for threads and the 2GB shard size).
class FixtureModel {
 public:
  explicit FixtureModel(const std::string& preset) : fixture_(load_fixture(preset)) {
    dir_ = std::filesystem::temp_directory_path() /
           ("nanovllm_fixture_" + preset + "_" + std::to_string(std::random_device{}()));
    config_ = model_preset(fixture_.preset);
    ModelWriterOptions options;
    options.preset = fixture_.preset;
    options.seed = fixture_.seed;
    options.max_shard_bytes = parse_byte_size("2GB");
    write_model_folder(config_, dir_, options);
    runner_ = std::make_unique<ModelRunner>(
        dir_, config_, comm_,
        ModelRunnerOptions{
            .block_size = kBlockSize, .num_kv_blocks = kNumBlocks, .cpu_threads = kThreads});
  }
  ~FixtureModel() {
    runner_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const Fixture& fixture() const { return fixture_; }
  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  ModelRunner& runner() { return *runner_; }

 private:
  Fixture fixture_;
  std::filesystem::path dir_;
  ModelConfig config_;
  SingleRankCommunicator comm_;
  std::unique_ptr<ModelRunner> runner_;
};

FixtureModel& model(const std::string& preset) {
  static std::map<std::string, std::unique_ptr<FixtureModel>> models;
  auto& m = models[preset];
  if (!m) m = std::make_unique<FixtureModel>(preset);
  return *m;
}

// Log-softmax (in double) of our logits at every prompt position: [len][V].
std::vector<std::vector<double>> teacher_forced_logprobs(ModelRunner& runner,
                                                         const std::vector<int32_t>& ids) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.seed = 0;
  Sequence seq(0, ids, params, kBlockSize);
  for (int b = 0; b < seq.num_blocks(); ++b) seq.block_table.push_back(b);
  Sequence* seqs[] = {&seq};
  SamplingSlots slots(1);
  StepCommand cmd = build_prefill_command(seqs, kBlockSize, slots, {});
  cmd.logits_indices.resize(ids.size());
  std::iota(cmd.logits_indices.begin(), cmd.logits_indices.end(), 0);
  const TensorView logits = runner.run_model(cmd);  // [len, V] f32
  const int64_t v = logits.size(1);
  std::vector<std::vector<double>> out(ids.size(), std::vector<double>(static_cast<size_t>(v)));
  for (size_t r = 0; r < ids.size(); ++r) {
    const float* row = static_cast<const float*>(logits.data) + r * logits.stride[0];
    const double mx = *std::max_element(row, row + v);
    double sum = 0.0;
    for (int64_t i = 0; i < v; ++i) sum += std::exp(row[i] - mx);
    const double lse = mx + std::log(sum);
    for (int64_t i = 0; i < v; ++i) out[r][i] = row[i] - lse;
  }
  return out;
}

// Our tokens ranked by logprob, the first n.
std::vector<int32_t> top_n(const std::vector<double>& lp, int n) {
  std::vector<int32_t> idx(lp.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + n, idx.end(),
                    [&](int32_t a, int32_t b) { return lp[a] > lp[b]; });
  idx.resize(n);
  return idx;
}

class TransformersFixture : public testing::TestWithParam<std::string> {};

TEST_P(TransformersFixture, WrittenFolderIsTheFixturesMkmodelFolder) {
  FixtureModel& m = model(GetParam());
  std::ifstream in(m.dir() / "config.json");
  const nlohmann::json config = nlohmann::json::parse(in);
  EXPECT_EQ(config.at("nanovllm_mkmodel").at("preset"), m.fixture().preset);
  EXPECT_EQ(config.at("nanovllm_mkmodel").at("seed"), m.fixture().seed);
  EXPECT_EQ(m.fixture().preset, GetParam());
  EXPECT_EQ(m.fixture().prompts.size(), 8u);
}

TEST_P(TransformersFixture, TeacherForcedLogprobsMatchTransformers) {
  FixtureModel& m = model(GetParam());
  double max_dev = 0.0, sum_dev = 0.0;
  int64_t num_dev = 0, positions = 0, top1_agree = 0, sets_checked = 0, sets_agree = 0;
  for (const FixturePrompt& p : m.fixture().prompts) {
    const auto lp = teacher_forced_logprobs(m.runner(), p.ids);
    ASSERT_EQ(lp.size(), p.teacher_forced_top5.size()) << p.name;
    double prompt_sum_dev = 0.0;
    for (size_t pos = 0; pos < lp.size(); ++pos) {
      const std::vector<TopEntry>& want = p.teacher_forced_top5[pos];
      const std::vector<int32_t> ours = top_n(lp[pos], 6);
      ++positions;
      top1_agree += ours[0] == want[0].token;
      EXPECT_EQ(ours[0], want[0].token) << p.name << " position " << pos;
      for (const TopEntry& e : want) {
        const double dev = std::abs(lp[pos][e.token] - e.logprob);
        max_dev = std::max(max_dev, dev);
        sum_dev += dev;
        prompt_sum_dev += dev;
        ++num_dev;
        EXPECT_LE(dev, kLogprobTolerance)
            << p.name << " position " << pos << " token " << e.token << ": ours "
            << lp[pos][e.token] << ", transformers " << e.logprob;
      }
      // Top-5 sets: a fixture top-5 token missing from ours must be a near-tie with our 5th
      // (within 2 tolerances: both sides' noise); where our 5th/6th gap exceeds that, no
      // swap is possible and the sets must be equal.
      const std::set<int32_t> our_set(ours.begin(), ours.begin() + 5);
      std::set<int32_t> their_set;
      for (const TopEntry& e : want) their_set.insert(e.token);
      sets_agree += our_set == their_set;
      for (const TopEntry& e : want) {
        if (our_set.contains(e.token)) continue;
        EXPECT_LE(lp[pos][ours[4]] - lp[pos][e.token], 2 * kLogprobTolerance)
            << p.name << " position " << pos << " token " << e.token;
      }
      if (lp[pos][ours[4]] - lp[pos][ours[5]] > 2 * kLogprobTolerance) {
        ++sets_checked;
        EXPECT_EQ(our_set, their_set) << p.name << " position " << pos;
      }
    }
    EXPECT_LE(prompt_sum_dev / (5.0 * static_cast<double>(lp.size())), kMeanLogprobTolerance)
        << p.name;
  }
  std::printf(
      "[%s] teacher forcing: %lld positions, top-1 agree %lld, logprob |dev| max %.4f "
      "mean %.4f over %lld, top-5 sets equal at %lld (%lld with a 5th/6th gap > 2 tol)\n",
      GetParam().c_str(), static_cast<long long>(positions), static_cast<long long>(top1_agree),
      max_dev, sum_dev / num_dev, static_cast<long long>(num_dev),
      static_cast<long long>(sets_agree), static_cast<long long>(sets_checked));
  EXPECT_GE(sets_agree, positions / 2);
}

TEST_P(TransformersFixture, PerturbingAnEarlyTokenMovesLogprobsLikeTransformers) {
  FixtureModel& m = model(GetParam());
  int checked = 0;
  for (const FixturePrompt& p : m.fixture().prompts) {
    if (!p.has_perturbed) continue;
    ++checked;
    // The fixture's own effect must dwarf our noise, or the checks below prove nothing.
    EXPECT_GE(p.perturbed_max_abs_change, kPerturbationRatio * kMeanLogprobTolerance) << p.name;
    EXPECT_GE(p.perturbed_max_abs_change, 2 * kShiftTolerance) << p.name;
    const std::vector<double> base = teacher_forced_logprobs(m.runner(), p.ids).back();
    const std::vector<double> moved = teacher_forced_logprobs(m.runner(), p.perturbed_ids).back();
    // Same statistic as the script: max |change| over the unperturbed last top-5 tokens.
    double ours = 0.0;
    for (const TopEntry& e : p.teacher_forced_top5.back())
      ours = std::max(ours, std::abs(moved[e.token] - base[e.token]));
    std::printf("[%s] %s: perturbation moves logprobs by %.4f (transformers %.4f)\n",
                GetParam().c_str(), p.name.c_str(), ours, p.perturbed_max_abs_change);
    EXPECT_GE(ours, kPerturbationRatio * kMeanLogprobTolerance) << p.name;
    EXPECT_NEAR(ours, p.perturbed_max_abs_change, kShiftTolerance) << p.name;
    // And the perturbed prompt itself matches transformers' last-position top-5.
    EXPECT_EQ(top_n(moved, 1)[0], p.perturbed_last_top5[0].token) << p.name;
    for (const TopEntry& e : p.perturbed_last_top5)
      EXPECT_NEAR(moved[e.token], e.logprob, kLogprobTolerance) << p.name << " token " << e.token;
  }
  EXPECT_GE(checked, 5);
}

TEST_P(TransformersFixture, GreedyContinuationThroughTheEngineEqualsTransformers) {
  FixtureModel& m = model(GetParam());
  EngineConfig config;
  config.kvcache_block_size = kBlockSize;
  config.num_kvcache_blocks = kNumBlocks;
  config.max_model_len = 512;
  config.max_num_batched_tokens = 1024;
  config.eos_token_ids = m.config().eos_token_ids;
  LLMEngine engine(config, m.runner());
  std::map<int64_t, const FixturePrompt*> by_id;
  for (const FixturePrompt& p : m.fixture().prompts) {
    SamplingParams params;
    params.temperature = 0.0f;
    params.max_tokens = static_cast<int32_t>(p.greedy_tokens.size());
    params.ignore_eos = true;  // the script treats eos as an ordinary token
    const AddRequestResult r = engine.add_request(p.ids, params);
    ASSERT_TRUE(r.ok()) << r.error;
    by_id[*r.seq_id] = &p;
  }
  int finished = 0;
  for (int steps = 0; !engine.is_finished() && steps < 1000; ++steps)
    for (const RequestOutput& out : engine.step()) {
      ++finished;
      EXPECT_EQ(out.completion_token_ids, by_id.at(out.seq_id)->greedy_tokens)
          << by_id.at(out.seq_id)->name;
    }
  EXPECT_EQ(finished, static_cast<int>(by_id.size()));
}

INSTANTIATE_TEST_SUITE_P(Presets, TransformersFixture, testing::Values("tiny", "tiny-128"),
                         [](const testing::TestParamInfo<std::string>& i) {
                           return i.param == "tiny" ? std::string("Tiny") : std::string("Tiny128");
                         });

}  // namespace
}  // namespace nanovllm
