// StepCommand through Boost.Serialization: random contents survive the round trip field by
// field, alone and through the ring; bytes that do not decode are a clean CHECK failure.
#include "ipc/step_command_serialization.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <utility>

#include "ipc/broadcast_ring.h"
#include "ipc/step_ring_sizing.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

template <typename T, typename Rng>
std::vector<T> random_vector(Rng& rng, size_t n) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>)
      x = std::uniform_real_distribution<T>(-5, 5)(rng);
    else
      x = static_cast<T>(rng());
  }
  return v;
}

StepCommand random_command(uint32_t seed) {
  std::mt19937_64 rng(seed);
  StepCommand c;
  c.kind = static_cast<StepKind>(rng() % 3);
  c.step_id = rng();
  const size_t t = rng() % 300, b = 1 + rng() % 20, s = rng() % 20;
  c.input_ids = random_vector<int32_t>(rng, t);
  c.positions = random_vector<int32_t>(rng, t);
  c.slot_mapping = random_vector<int32_t>(rng, t);
  c.cu_seqlens_q = random_vector<int32_t>(rng, b + 1);
  c.cu_seqlens_k = random_vector<int32_t>(rng, b + 1);
  c.max_seqlen_q = static_cast<int32_t>(rng());
  c.max_seqlen_k = static_cast<int32_t>(rng());
  c.context_lens = random_vector<int32_t>(rng, b);
  c.block_table_width = static_cast<int32_t>(rng() % 9);
  c.block_tables = random_vector<int32_t>(rng, b * c.block_table_width);
  c.logits_indices = random_vector<int32_t>(rng, s);
  c.sample_slots = random_vector<int32_t>(rng, s);
  // Any number of slots refilled (0 in most decode steps), every field random.
  const size_t n = rng() % 3 == 0 ? 0 : rng() % 20;
  for (size_t i = 0; i < n; ++i) {
    const auto f = random_vector<float>(rng, 3);
    const auto k = random_vector<int32_t>(rng, 2);
    SlotSamplingParams p{k[0], f[0], k[1], f[1], f[2], rng()};
    p.min_tokens_position = static_cast<int32_t>(rng());
    p.min_tokens_masked_ids = random_vector<int32_t>(rng, rng() % (kMaxMinTokensMaskedIds + 1));
    c.new_slot_params.push_back(std::move(p));
  }
  return c;
}

bool same(const SlotSamplingParams& a, const SlotSamplingParams& b) {
  // Bit-exact floats: the binary archive copies them.
  return a.slot == b.slot && a.temperature == b.temperature && a.top_k == b.top_k &&
         a.top_p == b.top_p && a.min_p == b.min_p && a.seed == b.seed &&
         a.min_tokens_position == b.min_tokens_position &&
         a.min_tokens_masked_ids == b.min_tokens_masked_ids;
}

void expect_same(const StepCommand& a, const StepCommand& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.step_id, b.step_id);
  EXPECT_EQ(a.input_ids, b.input_ids);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.slot_mapping, b.slot_mapping);
  EXPECT_EQ(a.cu_seqlens_q, b.cu_seqlens_q);
  EXPECT_EQ(a.cu_seqlens_k, b.cu_seqlens_k);
  EXPECT_EQ(a.max_seqlen_q, b.max_seqlen_q);
  EXPECT_EQ(a.max_seqlen_k, b.max_seqlen_k);
  EXPECT_EQ(a.context_lens, b.context_lens);
  EXPECT_EQ(a.block_tables, b.block_tables);
  EXPECT_EQ(a.block_table_width, b.block_table_width);
  EXPECT_EQ(a.logits_indices, b.logits_indices);
  EXPECT_EQ(a.sample_slots, b.sample_slots);
  ASSERT_EQ(a.new_slot_params.size(), b.new_slot_params.size());
  for (size_t i = 0; i < a.new_slot_params.size(); ++i)
    EXPECT_TRUE(same(a.new_slot_params[i], b.new_slot_params[i])) << "new_slot_params " << i;
}

TEST(StepCommandSerialization, RandomCommandsRoundTripFieldByField) {
  for (uint32_t seed = 0; seed < 50; ++seed) {
    const StepCommand c = random_command(seed);
    expect_same(decode_step_command(encode_step_command(c)), c);
  }
}

TEST(StepCommandSerialization, SlotParamsRoundTripAtTheExtremes) {
  StepCommand c;
  c.kind = StepKind::kPrefill;
  c.sample_slots = {0, 511, 3};
  c.new_slot_params = {{0, 0.0f, -1, 1.0f, 0.0f, 0},
                       {511, 0.01f, 151936, 1e-7f, 1.0f, ~0ull},
                       {3, 2.0f, 0, 0.5f, 0.05f, 0x8000000000000001ull}};
  const StepCommand back = decode_step_command(encode_step_command(c));
  EXPECT_EQ(back.sample_slots, c.sample_slots);
  ASSERT_EQ(back.new_slot_params.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(same(back.new_slot_params[i], c.new_slot_params[i])) << "entry " << i;
}

TEST(StepCommandSerialization, MinTokensMaskRoundTripsAndRefilledSlotsMaskNothing) {
  StepCommand c;
  c.kind = StepKind::kPrefill;
  c.sample_slots = {2, 0, 1};
  SlotSamplingParams eos_and_stops{2, 0.0f, -1, 1.0f, 0.0f, 7};
  eos_and_stops.min_tokens_position = 37;  // a 17-token prompt, min_tokens 20
  eos_and_stops.min_tokens_masked_ids = {151645, 151643, 13, 0};
  SlotSamplingParams widest{0, 0.7f, 20, 0.95f, 0.0f, 8};
  widest.min_tokens_position = std::numeric_limits<int32_t>::max();
  for (int i = 0; i < kMaxMinTokensMaskedIds; ++i)
    widest.min_tokens_masked_ids.push_back(151935 - i);
  c.new_slot_params = {eos_and_stops, widest, SlotSamplingParams{1, 1.0f, -1, 1.0f, 0.0f, 9}};
  const StepCommand back = decode_step_command(encode_step_command(c));
  ASSERT_EQ(back.new_slot_params.size(), 3u);
  EXPECT_EQ(back.new_slot_params[0].min_tokens_position, 37);
  EXPECT_EQ(back.new_slot_params[0].min_tokens_masked_ids,
            (std::vector<int32_t>{151645, 151643, 13, 0}));
  EXPECT_EQ(back.new_slot_params[1].min_tokens_position, std::numeric_limits<int32_t>::max());
  EXPECT_EQ(back.new_slot_params[1].min_tokens_masked_ids, widest.min_tokens_masked_ids);
  EXPECT_EQ(back.new_slot_params[2].min_tokens_position, 0);  // a refill that masks nothing
  EXPECT_TRUE(back.new_slot_params[2].min_tokens_masked_ids.empty());
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(same(back.new_slot_params[i], c.new_slot_params[i])) << "entry " << i;
}

TEST(StepCommandSerialization, WorstCaseCommandHoldsEverySlotsWidestMask) {
  // The ring's slot bound counts max_num_seqs new slots, each with the longest mask: a prefill
  // of that many sequences with masks that long fits it.
  const StepLimits limits{256, 8, 256, 16};
  const StepCommand worst = worst_case_step_command(limits);
  ASSERT_EQ(worst.new_slot_params.size(), 8u);
  for (const SlotSamplingParams& p : worst.new_slot_params)
    EXPECT_EQ(p.min_tokens_masked_ids.size(), static_cast<size_t>(kMaxMinTokensMaskedIds));
  StepCommand c = worst;
  for (SlotSamplingParams& p : c.new_slot_params) {
    p.min_tokens_position = 1 << 30;
    for (int32_t& id : p.min_tokens_masked_ids) id = 151000;
  }
  EXPECT_LE(encode_step_command(c).size(), max_step_command_bytes(limits));
  // ...and holds them: without the masks the command is 8 * 48 ids (4 bytes each) smaller.
  for (SlotSamplingParams& p : c.new_slot_params) p.min_tokens_masked_ids.clear();
  EXPECT_EQ(max_step_command_bytes(limits) - encode_step_command(c).size(),
            size_t{8} * kMaxMinTokensMaskedIds * 4);
}

TEST(StepCommandSerialization, SlotParamsCostTheirFieldsOnly) {
  // Plain data (no class version or tracking per entry): 4 + 4 + 4 + 4 + 4 + 8 = 28 bytes, the
  // min_tokens position 4 more and an empty mask its length (kEmptyMask); each masked id 4.
  constexpr size_t kEmptyMask = 8;
  constexpr size_t kEntry = 28 + 4 + kEmptyMask;
  StepCommand c;
  c.kind = StepKind::kPrefill;
  const size_t base = encode_step_command(c).size();
  c.new_slot_params.assign(1, SlotSamplingParams{});
  const size_t one = encode_step_command(c).size();
  c.new_slot_params.assign(101, SlotSamplingParams{});
  EXPECT_EQ(encode_step_command(c).size() - one, 100u * kEntry);
  EXPECT_LT(one - base, kEntry + 16u);
  for (SlotSamplingParams& p : c.new_slot_params) p.min_tokens_masked_ids.assign(3, 1);
  EXPECT_EQ(encode_step_command(c).size() - one, 100u * kEntry + 101u * 3u * 4u);
}

TEST(StepCommandSerialization, ExitCommandRoundTrips) {
  StepCommand exit_cmd;
  exit_cmd.kind = StepKind::kExit;
  exit_cmd.step_id = 42;
  const StepCommand back = decode_step_command(encode_step_command(exit_cmd));
  EXPECT_EQ(back.kind, StepKind::kExit);
  EXPECT_EQ(back.step_id, 42u);
  EXPECT_TRUE(back.input_ids.empty());
}

TEST(StepCommandSerialization, EncodingIsCompactForPrimitiveVectors) {
  // The binary archive writes an int32 vector as one block: about 4 bytes an element.
  StepCommand c;
  c.kind = StepKind::kPrefill;
  c.input_ids.assign(10000, 1);
  c.positions.assign(10000, 2);
  c.slot_mapping.assign(10000, 3);
  const size_t payload = 3 * 10000 * sizeof(int32_t);
  EXPECT_LT(encode_step_command(c).size(), payload + 512);
}

TEST(StepCommandSerialization, TruncatedBytesAreACheckFailure) {
  const std::vector<uint8_t> bytes = encode_step_command(random_command(7));
  ASSERT_GT(bytes.size(), 20u);
  const std::span<const uint8_t> half(bytes.data(), bytes.size() / 2);
  EXPECT_THROW(decode_step_command(half), CheckError);
}

TEST(StepCommandSerialization, UnknownKindIsACheckFailure) {
  std::vector<uint8_t> bytes = encode_step_command(StepCommand{});
  // Find the kind byte by encoding two commands that differ only in their kind.
  StepCommand prefill;
  prefill.kind = StepKind::kPrefill;
  const std::vector<uint8_t> other = encode_step_command(prefill);
  ASSERT_EQ(bytes.size(), other.size());
  size_t at = 0;
  while (at < bytes.size() && bytes[at] == other[at]) ++at;
  ASSERT_LT(at, bytes.size());
  bytes[at] = 200;
  EXPECT_THROW(decode_step_command(bytes), CheckError);
}

TEST(StepCommandSerialization, CommandsCrossTheRingIntact) {
  const RingConfig config{.num_readers = 1,
                          .slot_count = 3,
                          .slot_bytes = 64 * 1024,
                          .payload_schema = kStepCommandSchemaVersion};
  std::vector<uint8_t> region(ring_region_bytes(config) + 64);
  void* base = region.data() + (64 - reinterpret_cast<uintptr_t>(region.data()) % 64) % 64;
  ring_init(base, ring_region_bytes(config), config);
  RingWriter writer(base, ring_region_bytes(config), kStepCommandSchemaVersion);
  RingReader reader(base, ring_region_bytes(config), kStepCommandSchemaVersion, 0);
  std::vector<uint8_t> got;
  for (uint32_t seed = 100; seed < 120; ++seed) {
    writer.write(encode_step_command(random_command(seed)));
    ASSERT_TRUE(reader.read(got));
    expect_same(decode_step_command(got), random_command(seed));
  }
}

}  // namespace
}  // namespace nanovllm
