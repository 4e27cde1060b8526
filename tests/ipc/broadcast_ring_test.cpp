// The broadcast ring across processes: exactly-once in-order delivery under stress,
// backpressure, and clean fatal errors for corruption, a dead writer and a payload schema
// other than the one the ring was created with.
#include "ipc/broadcast_ring.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "ipc/ipc_error.h"
#include "ipc/shm_segment.h"
#include "kernels/check.h"
#include "tests/ipc/child_processes.h"

namespace nanovllm {
namespace {

using namespace std::chrono_literals;
using testing::exited_ok;
using testing::fork_children;
using testing::wait_children;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Message `seq` of the stress test: its size and every byte follow from seq alone, so a
// reader can check it without any shared state.
std::vector<uint8_t> expected_message(uint64_t seq, size_t max_bytes) {
  const size_t n = splitmix64(seq) % (max_bytes + 1);
  std::vector<uint8_t> m(n);
  for (size_t i = 0; i < n; ++i)
    m[i] = static_cast<uint8_t>(splitmix64(seq * 7919 + i / 8) >> (8 * (i % 8)));
  return m;
}

// The payload schema these rings carry (any number: the ring only compares it).
constexpr uint32_t kSchema = 7;

struct RingFixture : ::testing::Test {
  void make(RingConfig config) {
    config.payload_schema = kSchema;
    bytes = ring_region_bytes(config);
    segment.emplace(ShmSegment::create(make_segment_name("nvtest-ring"), bytes));
    ring_init(segment->data(), bytes, config);
  }
  void TearDown() override {
    if (segment) ShmSegment::remove(segment->name());
  }
  std::optional<ShmSegment> segment;
  size_t bytes = 0;
};

TEST_F(RingFixture, StressOneWriterThreeReadersEveryMessageOnceInOrderByteExact) {
  constexpr uint64_t kMessages = 100000;
  constexpr size_t kSlotBytes = 1024;
  make({.num_readers = 3, .slot_count = 16, .slot_bytes = kSlotBytes});
  void* region = segment->data();
  const auto start = std::chrono::steady_clock::now();
  const auto pids = fork_children(4, [&](int i) -> int {
    if (i == 0) {
      RingWriter writer(region, bytes, kSchema);
      for (uint64_t s = 0; s < kMessages; ++s) writer.write(expected_message(s, kSlotBytes));
      return 0;
    }
    RingReader reader(region, bytes, kSchema, static_cast<uint32_t>(i - 1));
    std::mt19937 rng(static_cast<unsigned>(i));
    std::vector<uint8_t> got;
    // The writer may exit before a reader is done: published messages are still delivered.
    for (uint64_t seq = 0; seq < kMessages; ++seq) {
      reader.read(got);
      if (got != expected_message(seq, kSlotBytes)) {
        std::fprintf(stderr, "reader %d: message %llu differs\n", i - 1,
                     static_cast<unsigned long long>(seq));
        return 1;
      }
      // Random stalls make readers fall behind, so the writer hits a full ring.
      if (rng() % 4000 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
    }
    return 0;
  });
  const auto status = wait_children(pids, 60s);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ figures  ] %llu messages to 3 readers in %.2f s (%.0f msg/s)\n",
              static_cast<unsigned long long>(kMessages), secs, kMessages / secs);
  for (size_t i = 0; i < status.size(); ++i) EXPECT_TRUE(exited_ok(status[i])) << "child " << i;
}

TEST_F(RingFixture, CorruptedPayloadIsFatalAndNamesSlotAndChecksum) {
  make({.num_readers = 1, .slot_count = 4, .slot_bytes = 64});
  RingWriter writer(segment->data(), bytes, kSchema);
  RingReader reader(segment->data(), bytes, kSchema, 0);
  const std::vector<uint8_t> msg(40, 7);
  for (int i = 0; i < 3; ++i) writer.write(msg);
  ring_slot_bytes(segment->data(), 1)[sizeof(MessageHeader) + 5] ^= 0x10;
  std::vector<uint8_t> got;
  ASSERT_TRUE(reader.read(got));
  EXPECT_EQ(got, msg);
  try {
    reader.read(got);
    FAIL() << "a corrupted payload was accepted";
  } catch (const CheckError& e) {
    EXPECT_NE(std::string(e.what()).find("ring slot 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
}

TEST_F(RingFixture, BadHeaderMagicIsFatalAndNamesSlot) {
  make({.num_readers = 1, .slot_count = 2, .slot_bytes = 64});
  RingWriter writer(segment->data(), bytes, kSchema);
  RingReader reader(segment->data(), bytes, kSchema, 0);
  writer.write(std::vector<uint8_t>(8, 1));
  ring_slot_bytes(segment->data(), 0)[0] ^= 0xff;
  std::vector<uint8_t> got;
  try {
    reader.read(got);
    FAIL() << "a bad magic was accepted";
  } catch (const CheckError& e) {
    EXPECT_NE(std::string(e.what()).find("ring slot 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad magic"), std::string::npos) << e.what();
  }
}

TEST_F(RingFixture, AttachWithAnotherPayloadSchemaIsRefusedNamingBothSchemas) {
  make({.num_readers = 1, .slot_count = 2, .slot_bytes = 16});
  const auto expect_refused = [](auto attach) {
    try {
      attach();
      ADD_FAILURE() << "a ring of payload schema 7 was attached as schema 8";
    } catch (const CheckError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("payload schema 7"), std::string::npos) << what;
      EXPECT_NE(what.find("schema 8"), std::string::npos) << what;
    }
  };
  expect_refused([&] { RingWriter writer(segment->data(), bytes, kSchema + 1); });
  expect_refused([&] { RingReader reader(segment->data(), bytes, kSchema + 1, 0); });
  // A refused attach registered nothing: the right schema still gets both roles.
  RingWriter writer(segment->data(), bytes, kSchema);
  RingReader reader(segment->data(), bytes, kSchema, 0);
  EXPECT_EQ(writer.payload_schema(), kSchema);
  writer.write(std::vector<uint8_t>{4});
  std::vector<uint8_t> got;
  ASSERT_TRUE(reader.read(got));
  EXPECT_EQ(got, std::vector<uint8_t>{4});
}

TEST_F(RingFixture, WriterWaitsForTheSlowestReaderWhenFull) {
  make({.num_readers = 2, .slot_count = 2, .slot_bytes = 16});
  const WaitPolicy short_wait{.poll = 10ms, .timeout = 100ms};
  RingWriter writer(segment->data(), bytes, kSchema, short_wait);
  RingReader fast(segment->data(), bytes, kSchema, 0);
  RingReader slow(segment->data(), bytes, kSchema, 1);
  const std::vector<uint8_t> a{1}, b{2}, c{3};
  writer.write(a);
  writer.write(b);
  std::vector<uint8_t> got;
  ASSERT_TRUE(fast.read(got));
  ASSERT_TRUE(fast.read(got));
  // Both slots still hold a message the slow reader has not read: the writer must wait.
  EXPECT_THROW(writer.write(c), IpcError);
  ASSERT_TRUE(slow.read(got));
  EXPECT_EQ(got, a);
  writer.write(c);  // slot 0 is free again
  ASSERT_TRUE(slow.read(got));
  EXPECT_EQ(got, b);
  ASSERT_TRUE(slow.read(got));
  EXPECT_EQ(got, c);
  ASSERT_TRUE(fast.read(got));
  EXPECT_EQ(got, c);
}

TEST_F(RingFixture, EmptyMessageIsDeliveredInOrder) {
  make({.num_readers = 1, .slot_count = 4, .slot_bytes = 16});
  RingWriter writer(segment->data(), bytes, kSchema);
  RingReader reader(segment->data(), bytes, kSchema, 0);
  writer.write(std::vector<uint8_t>{9, 8});
  writer.write(std::vector<uint8_t>{});
  std::vector<uint8_t> got;
  ASSERT_TRUE(reader.read(got));
  EXPECT_EQ(got, (std::vector<uint8_t>{9, 8}));
  ASSERT_TRUE(reader.read(got));
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(reader.messages_read(), 2u);
}

TEST_F(RingFixture, MessageLargerThanASlotIsACheckFailure) {
  make({.num_readers = 1, .slot_count = 2, .slot_bytes = 100});
  RingWriter writer(segment->data(), bytes, kSchema);
  EXPECT_NO_THROW(writer.write(std::vector<uint8_t>(100)));
  EXPECT_THROW(writer.write(std::vector<uint8_t>(101)), CheckError);
}

TEST_F(RingFixture, DeadWriterEndsTheReaderWithAnErrorWithinTheBound) {
  make({.num_readers = 1, .slot_count = 8, .slot_bytes = 16});
  void* region = segment->data();
  const auto pids = fork_children(1, [&](int) -> int {
    RingWriter writer(region, bytes, kSchema);
    for (uint8_t i = 0; i < 5; ++i) writer.write(std::vector<uint8_t>{i});
    ::raise(SIGKILL);  // dies without sending EXIT
    return 0;
  });
  RingReader reader(region, bytes, kSchema, 0, WaitPolicy{.poll = 50ms, .timeout = 0ms});
  std::vector<uint8_t> got;
  for (uint8_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(reader.read(got));
    EXPECT_EQ(got, std::vector<uint8_t>{i});
  }
  // The child is now a zombie (not reaped yet): it must still count as dead.
  const auto t0 = std::chrono::steady_clock::now();
  try {
    reader.read(got);
    ADD_FAILURE() << "read returned after the writer died";
  } catch (const IpcError& e) {
    EXPECT_NE(std::string(e.what()).find("writer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("died"), std::string::npos) << e.what();
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ figures  ] reader noticed the dead writer after %.0f ms (poll 50 ms)\n", ms);
  EXPECT_LT(ms, 2000.0);
  const auto status = wait_children(pids, 10s);
  EXPECT_TRUE(WIFSIGNALED(status[0]));
}

TEST_F(RingFixture, ReaderOverallTimeoutGivesAnError) {
  make({.num_readers = 1, .slot_count = 2, .slot_bytes = 16});
  RingWriter writer(segment->data(), bytes, kSchema);  // alive, but never writes
  RingReader reader(segment->data(), bytes, kSchema, 0, WaitPolicy{.poll = 10ms, .timeout = 80ms});
  std::vector<uint8_t> got;
  EXPECT_THROW(reader.read(got), IpcError);
}

TEST_F(RingFixture, AbortWakesAWaitingReaderWithAnError) {
  make({.num_readers = 1, .slot_count = 2, .slot_bytes = 16});
  RingReader reader(segment->data(), bytes, kSchema, 0,
                    WaitPolicy{.poll = 10ms, .timeout = 5000ms});
  ring_abort(segment->data());
  std::vector<uint8_t> got;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(reader.read(got), IpcError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

}  // namespace
}  // namespace nanovllm
