// Random mutations of valid safetensors files: each must either parse into tensors that
// lie inside the data section, or throw ModelFolderError. Anything else (another
// exception, a crash, an out-of-bounds read, visible under -fsanitize=address) fails.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "layers/model_folder_error.h"
#include "layers/safetensors.h"
#include "tests/layers/model_folder_test_util.h"

namespace nanovllm {
namespace {

std::string valid_file() {
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("emb":{"dtype":"BF16","shape":[4,3],"data_offsets":[0,24]},)"
                             R"("norm":{"dtype":"F32","shape":[3],"data_offsets":[24,36]},)"
                             R"("half":{"dtype":"F16","shape":[2,1,2],"data_offsets":[36,44]}})";
  std::string data(44, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  return testing::safetensors_bytes(header, data);
}

struct Outcome {
  int accepted = 0;
  int rejected = 0;
};

// Parses an exactly-sized heap copy (so a read past the end is an ASan error) and checks
// the result's invariants.
void check_one(const std::string& bytes, Outcome& out) {
  std::vector<std::byte> buf(bytes.size());
  std::memcpy(buf.data(), bytes.data(), bytes.size());
  try {
    const SafetensorsHeader h = parse_safetensors(buf, "fuzz.safetensors");
    ASSERT_LE(h.data_offset, buf.size());
    ASSERT_EQ(h.data_size, buf.size() - h.data_offset);
    uint64_t sum = 0;
    for (const SafetensorsTensor& t : h.tensors) {
      ASSERT_LE(t.begin, t.end);
      ASSERT_LE(t.end, h.data_size);
      uint64_t numel = 1;
      for (int64_t d : t.shape) {
        ASSERT_GE(d, 0);
        numel *= static_cast<uint64_t>(d);
      }
      ASSERT_EQ(t.nbytes(), numel * dtype_size(t.dtype));
      for (uint64_t i = t.begin; i < t.end; ++i)
        sum += static_cast<uint8_t>(buf[h.data_offset + i]);
    }
    (void)sum;
    ++out.accepted;
  } catch (const ModelFolderError&) {
    ++out.rejected;
  }
}

TEST(SafetensorsFuzz, ValidBaseFileParses) {
  Outcome o;
  check_one(valid_file(), o);
  EXPECT_EQ(o.accepted, 1);
}

TEST(SafetensorsFuzz, EveryTruncationIsRejectedOrConsistent) {
  const std::string base = valid_file();
  Outcome o;
  for (size_t n = 0; n < base.size(); ++n) check_one(base.substr(0, n), o);
  // Cutting the data section loses bytes that the offsets need: all must be rejected.
  EXPECT_EQ(o.accepted, 0);
  EXPECT_EQ(o.rejected, static_cast<int>(base.size()));
}

TEST(SafetensorsFuzz, RandomByteFlipsNeverCrash) {
  const std::string base = valid_file();
  std::mt19937_64 rng(1234);
  Outcome o;
  for (int iter = 0; iter < 6000; ++iter) {
    std::string m = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the length and the header (where the parser works), sometimes anywhere.
      const size_t limit = rng() % 4 == 0 ? m.size() : m.size() - 44;
      m[rng() % limit] = static_cast<char>(rng() & 0xff);
    }
    check_one(m, o);
  }
  EXPECT_EQ(o.accepted + o.rejected, 6000);
  EXPECT_GT(o.rejected, 1000);  // most header corruption must be caught
}

TEST(SafetensorsFuzz, HugeAndOffByOneLengthsAreRejected) {
  const std::string base = valid_file();
  const uint64_t real = base.size() - 8 - 44;
  std::mt19937_64 rng(99);
  Outcome o;
  std::vector<uint64_t> lengths = {
      0,         1,          real - 1,       real + 1,          real + 44,
      real + 45, UINT64_MAX, UINT64_MAX - 7, uint64_t{1} << 63, kMaxSafetensorsHeaderBytes + 1};
  for (int i = 0; i < 500; ++i) lengths.push_back(rng());
  for (uint64_t n : lengths) {
    std::string m = base;
    for (int b = 0; b < 8; ++b)
      m[static_cast<size_t>(b)] = static_cast<char>((n >> (8 * b)) & 0xff);
    check_one(m, o);
  }
  EXPECT_EQ(o.accepted + o.rejected, static_cast<int>(lengths.size()));
}

TEST(SafetensorsFuzz, NumbersReplacedByHostileValues) {
  // Rebuild the header with each number replaced by a hostile one; the length prefix stays
  // consistent so the parser reaches the checks on shapes and offsets.
  const std::vector<std::string> hostile = {"-1",
                                            "0",
                                            "1",
                                            "44",
                                            "45",
                                            "9223372036854775807",
                                            "9223372036854775808",
                                            "18446744073709551615",
                                            "18446744073709551616",
                                            "1e300",
                                            "-0",
                                            "2.5",
                                            "null",
                                            "\"7\"",
                                            "[]",
                                            "{}",
                                            "4294967296",
                                            "-9223372036854775808"};
  const std::string base = valid_file();
  const std::string header = base.substr(8, base.size() - 8 - 44);
  const std::string data = base.substr(base.size() - 44);
  std::vector<size_t> number_starts;
  for (size_t i = 0; i < header.size(); ++i)
    if (std::isdigit(static_cast<unsigned char>(header[i])) &&
        (i == 0 || !std::isdigit(static_cast<unsigned char>(header[i - 1]))))
      number_starts.push_back(i);
  ASSERT_GE(number_starts.size(), 15u);  // lengths, shapes, offsets
  Outcome o;
  std::mt19937_64 rng(7);
  for (size_t start : number_starts) {
    size_t end = start;
    while (end < header.size() && std::isdigit(static_cast<unsigned char>(header[end]))) ++end;
    for (const std::string& v : hostile)
      check_one(testing::safetensors_bytes(header.substr(0, start) + v + header.substr(end), data),
                o);
  }
  for (int i = 0; i < 2000; ++i) {  // several numbers at once
    std::string h = header;
    for (int k = 0; k < 3; ++k) {
      const size_t start = number_starts[rng() % number_starts.size()];
      if (start >= h.size() || !std::isdigit(static_cast<unsigned char>(h[start]))) continue;
      size_t end = start;
      while (end < h.size() && std::isdigit(static_cast<unsigned char>(h[end]))) ++end;
      h = h.substr(0, start) + hostile[rng() % hostile.size()] + h.substr(end);
    }
    check_one(testing::safetensors_bytes(h, data), o);
  }
  EXPECT_GT(o.rejected, 0);
  EXPECT_GT(o.accepted, 0);  // e.g. 0 -> 0 keeps the file valid
}

TEST(SafetensorsFuzz, StructuralGarbageInHeader) {
  const std::string data(44, '\0');
  Outcome o;
  const std::vector<std::string> headers = {
      "{",
      "}",
      "{}",
      "{\"a\":{}}",
      "{\"a\":null}",
      "{\"a\":[]}",
      std::string(100000, '['),
      "{\"a\":" + std::string(50000, '[') + std::string(50000, ']') + "}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"dtype\":\"BF16\"}}",
      "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} trailing",
      std::string("{\"a\"\0:1}", 8),
      "\xff\xfe{}",
      "{\"a\":\"\xc3\x28\"}"};
  for (const std::string& h : headers) check_one(testing::safetensors_bytes(h, data), o);
  EXPECT_EQ(o.accepted + o.rejected, static_cast<int>(headers.size()));
}

TEST(SafetensorsFuzz, MutatedFilesOnDiskThroughMmap) {
  testing::TempDir dir;
  const std::string base = valid_file();
  std::mt19937_64 rng(5);
  int ok = 0, bad = 0;
  for (int iter = 0; iter < 200; ++iter) {
    std::string m = base;
    if (iter % 2)
      m.resize(rng() % m.size());
    else
      m[rng() % (m.size() - 44)] = static_cast<char>(rng() & 0xff);
    const auto path = dir.path() / "m.safetensors";
    testing::write_file(path, m);
    try {
      const SafetensorsFile f = SafetensorsFile::open(path);
      for (const auto& t : f.tensors()) ASSERT_NE(f.data(t), nullptr);
      ++ok;
    } catch (const ModelFolderError&) {
      ++bad;
    }
  }
  EXPECT_EQ(ok + bad, 200);
  EXPECT_GT(bad, 100);  // every truncation is rejected
}

}  // namespace
}  // namespace nanovllm
