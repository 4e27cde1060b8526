#include "layers/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "layers/model_folder_error.h"
#include "layers/safetensors_writer.h"
#include "tests/layers/model_folder_test_util.h"

namespace nanovllm {
namespace {

using testing::safetensors_bytes;
using testing::TempDir;

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Expects parse_safetensors to throw a ModelFolderError mentioning the file and `fragment`.
void expect_rejected(const std::string& file, const std::string& fragment) {
  try {
    parse_safetensors(as_bytes(file), "/x/w.safetensors");
    FAIL() << "accepted";
  } catch (const ModelFolderError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("/x/w.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg << " lacks " << fragment;
  }
}

TEST(Safetensors, ParsesHandWrittenFile) {
  // Two F32 values and three BF16 values; metadata ignored.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[1,3],"data_offsets":[8,14]}})";
  const std::string file = safetensors_bytes(header, std::string(14, '\1'));
  const SafetensorsHeader h = parse_safetensors(as_bytes(file), "w.safetensors");
  EXPECT_EQ(h.data_offset, 8 + header.size());
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.tensors[0].dtype, DType::kF32);
  EXPECT_EQ(h.tensors[0].shape, std::vector<int64_t>{2});
  EXPECT_EQ(h.tensors[1].name, "b");
  EXPECT_EQ(h.tensors[1].dtype, DType::kBf16);
  EXPECT_EQ(h.tensors[1].shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(h.tensors[1].begin, 8u);
  EXPECT_EQ(h.tensors[1].nbytes(), 6u);
}

TEST(Safetensors, WriterRoundTripsValuesThroughMmap) {
  TempDir dir;
  const std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 1e-3f, 0.0f, -7.0f};
  std::vector<uint16_t> bf16;
  for (float v : {0.5f, -1.0f, 2.0f, 100.0f}) bf16.push_back(float_to_bf16(v));
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000};  // 1.0, -2.0 in IEEE half
  write_safetensors(dir.path() / "t.safetensors",
                    {{{"w.f32", DType::kF32, {2, 3}}, std::as_bytes(std::span(f32))},
                     {{"w.bf16", DType::kBf16, {4}}, std::as_bytes(std::span(bf16))},
                     {{"w.f16", DType::kF16, {2}}, std::as_bytes(std::span(f16))}},
                    {{"format", "pt"}});
  const SafetensorsFile file = SafetensorsFile::open(dir.path() / "t.safetensors");
  ASSERT_EQ(file.tensors().size(), 3u);
  for (const SafetensorsTensor& t : file.tensors()) {
    const std::byte* p = file.data(t);
    if (t.name == "w.f32") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
      std::vector<float> back(6);
      std::memcpy(back.data(), p, 24);
      EXPECT_EQ(back, f32);
    } else if (t.name == "w.bf16") {
      uint16_t v[4];
      std::memcpy(v, p, 8);
      EXPECT_EQ(bf16_to_float(v[0]), 0.5f);
      EXPECT_EQ(bf16_to_float(v[3]), 100.0f);
    } else {
      ASSERT_EQ(t.name, "w.f16");
      uint16_t v[2];
      std::memcpy(v, p, 4);
      EXPECT_EQ(f16_to_float(v[0]), 1.0f);
      EXPECT_EQ(f16_to_float(v[1]), -2.0f);
    }
    // The writer pads the header so every tensor starts 8-byte aligned in the file.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 8, 0u) << t.name;
  }
}

TEST(Safetensors, EmptyAndScalarTensorsAreValid) {
  const std::string header =
      R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"e":{"dtype":"BF16","shape":[0,5],"data_offsets":[4,4]}})";
  const auto h = parse_safetensors(as_bytes(safetensors_bytes(header, "abcd")), "f");
  ASSERT_EQ(h.tensors.size(), 2u);
}

TEST(Safetensors, RejectsTruncatedAndOversizedHeaders) {
  expect_rejected("", "truncated");
  expect_rejected(std::string(5, '\0'), "truncated");
  std::string file = safetensors_bytes("{}", "");
  file[0] = 100;  // header length past end of file
  expect_rejected(file, "runs past the end");
  std::string huge(8, '\xff');
  expect_rejected(huge + "{}", "implausibly large");
}

TEST(Safetensors, RejectsBadJson) {
  expect_rejected(safetensors_bytes("{\"a\":", ""), "not valid JSON");
  expect_rejected(safetensors_bytes("[1,2]", ""), "not a JSON object");
  expect_rejected(safetensors_bytes("", ""), "not a JSON object");
}

TEST(Safetensors, RejectsOutOfBoundsAndInconsistentOffsets) {
  auto one = [](const std::string& entry, size_t data) {
    return safetensors_bytes("{\"t\":" + entry + "}", std::string(data, '\0'));
  };
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 7), "past the data");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", 8), "begin > end");
  expect_rejected(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", 12), "needs 12");
  expect_rejected(one(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,8]})", 8), "bad dimension");
  expect_rejected(one(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})", 8),
                  "overflows");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})", 8),
                  "bad 'data_offsets'");
  expect_rejected(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})", 8), "data_offsets");
  expect_rejected(one(R"({"dtype":"F32","shape":[2]})", 8), "data_offsets");
  expect_rejected(one(R"({"shape":[2],"data_offsets":[0,8]})", 8), "dtype");
  expect_rejected(one(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})", 8), "shape");
  expect_rejected(one(R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})", 8), "bad dimension");
  expect_rejected(one("7", 8), "expected an object");
}

TEST(Safetensors, UnsupportedDtypeNamesTheTensor) {
  const std::string file = safetensors_bytes(
      R"({"model.position_ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
      std::string(8, '\0'));
  expect_rejected(file, "tensor 'model.position_ids': dtype 'I64' is not supported");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  const std::string file = safetensors_bytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      std::string(12, '\0'));
  expect_rejected(file, "overlap");
}

TEST(Safetensors, OpenReportsMissingFile) {
  TempDir dir;
  EXPECT_THROW(SafetensorsFile::open(dir.path() / "nope.safetensors"), ModelFolderError);
  testing::write_file(dir.path() / "empty.safetensors", "");
  EXPECT_THROW(SafetensorsFile::open(dir.path() / "empty.safetensors"), ModelFolderError);
}

}  // namespace
}  // namespace nanovllm
