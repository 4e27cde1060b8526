#include "ipc/broadcast_ring.h"

#include <semaphore.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstring>
#include <string>

#include "ipc/ipc_error.h"
#include "ipc/liveness.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "atomics in shared memory must be lock-free (address-free)");

constexpr size_t round_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

// Region layout (every part 64-byte aligned):
//   RingControl                          once
//   ReaderControl                        [num_readers]
//   SlotControl                          [slot_count]
//   slot                                 [slot_count][32 + round_up(slot_bytes, 64)]
struct alignas(64) RingControl {
  uint32_t magic;
  uint32_t version;
  uint32_t payload_schema;  // RingConfig::payload_schema, checked by every attach
  uint32_t num_readers;
  uint32_t slot_count;
  uint64_t slot_bytes;
  uint64_t slot_stride;
  int32_t launcher_pid;
  std::atomic<int32_t> writer_pid;  // 0 until the writer registers
  std::atomic<uint64_t> published;  // messages made visible so far
  std::atomic<uint32_t> aborted;    // ring_abort() was called
  sem_t free_slots;                 // slots every reader is done with
};
struct alignas(64) ReaderControl {
  sem_t ready;                     // messages not yet taken
  std::atomic<int32_t> pid;        // 0 until the reader registers
  std::atomic<uint64_t> consumed;  // messages this reader finished (diagnostics)
};
struct alignas(64) SlotControl {
  std::atomic<uint32_t> pending;  // readers yet to copy this slot out
};

struct Layout {
  RingControl* ctl;
  ReaderControl* readers;
  SlotControl* slots;
  uint8_t* slot_base;
};

Layout layout_of(void* region) {
  auto* base = static_cast<uint8_t*>(region);
  auto* ctl = reinterpret_cast<RingControl*>(base);
  Layout l{};
  l.ctl = ctl;
  l.readers = reinterpret_cast<ReaderControl*>(base + sizeof(RingControl));
  l.slots = reinterpret_cast<SlotControl*>(base + sizeof(RingControl) +
                                           sizeof(ReaderControl) * ctl->num_readers);
  l.slot_base = reinterpret_cast<uint8_t*>(l.slots + ctl->slot_count);
  return l;
}

Layout checked_layout(void* region, size_t bytes, uint32_t payload_schema) {
  CHECK(region != nullptr);
  CHECK_GE(bytes, sizeof(RingControl));
  const auto* ctl = static_cast<const RingControl*>(region);
  CHECK_MSG(ctl->magic == kRingMagic,
            "shared memory holds no initialised ring (magic " << std::hex << ctl->magic << ")");
  CHECK_MSG(ctl->version == kRingVersion,
            "ring layout version " << ctl->version << ", this build speaks " << kRingVersion);
  CHECK_MSG(ctl->payload_schema == payload_schema,
            "the ring carries payload schema " << ctl->payload_schema << ", this process reads "
                                               << "schema " << payload_schema
                                               << ": its ranks come from different builds");
  const RingConfig config{ctl->num_readers, ctl->slot_count, ctl->slot_bytes, payload_schema};
  CHECK_LE(ring_region_bytes(config), bytes);
  return layout_of(region);
}

uint8_t* slot_ptr(const Layout& l, uint64_t slot) {
  return l.slot_base + slot * l.ctl->slot_stride;
}

void check_not_aborted(const RingControl* ctl) {
  if (ctl->aborted.load(std::memory_order_acquire) != 0)
    throw IpcError("ring aborted: another rank failed");
}

}  // namespace

size_t ring_region_bytes(const RingConfig& c) {
  return sizeof(RingControl) + sizeof(ReaderControl) * c.num_readers +
         sizeof(SlotControl) * c.slot_count +
         c.slot_count * (sizeof(MessageHeader) + round_up(c.slot_bytes, 64));
}

void ring_init(void* region, size_t bytes, const RingConfig& config) {
  CHECK(region != nullptr);
  CHECK_MSG(reinterpret_cast<uintptr_t>(region) % 64 == 0, "ring region must be 64-byte aligned");
  CHECK_MSG(config.num_readers >= 1 && config.num_readers <= kMaxRingReaders,
            "num_readers " << config.num_readers);
  CHECK_GE(config.slot_count, 1u);
  CHECK_GE(config.slot_bytes, 1u);
  CHECK_LE(config.slot_bytes, uint64_t{UINT32_MAX});  // MessageHeader::length is 32-bit
  CHECK_LE(ring_region_bytes(config), bytes);
  auto* ctl = new (region) RingControl{};
  ctl->payload_schema = config.payload_schema;
  ctl->num_readers = config.num_readers;
  ctl->slot_count = config.slot_count;
  ctl->slot_bytes = config.slot_bytes;
  ctl->slot_stride = sizeof(MessageHeader) + round_up(config.slot_bytes, 64);
  ctl->launcher_pid = static_cast<int32_t>(::getpid());
  CHECK_EQ(::sem_init(&ctl->free_slots, /*pshared=*/1, config.slot_count), 0);
  const Layout l = layout_of(region);
  for (uint32_t r = 0; r < config.num_readers; ++r) {
    auto* rc = new (&l.readers[r]) ReaderControl{};
    CHECK_EQ(::sem_init(&rc->ready, 1, 0), 0);
  }
  for (uint32_t s = 0; s < config.slot_count; ++s) new (&l.slots[s]) SlotControl{};
  // Published last: a process that sees the magic sees a complete layout.
  std::atomic_thread_fence(std::memory_order_release);
  ctl->version = kRingVersion;
  ctl->magic = kRingMagic;
}

void ring_abort(void* region) {
  auto* ctl = static_cast<RingControl*>(region);
  ctl->aborted.store(1, std::memory_order_release);
}

uint8_t* ring_slot_bytes(void* region, uint32_t slot) {
  const Layout l = layout_of(region);
  CHECK_LT(slot, l.ctl->slot_count);
  return slot_ptr(l, slot);
}

// ---------------------------------------------------------------------------------------------

RingWriter::RingWriter(void* region, size_t bytes, uint32_t payload_schema, WaitPolicy policy)
    : region_(region), policy_(policy) {
  const Layout l = checked_layout(region, bytes, payload_schema);
  int32_t expected = 0;
  CHECK_MSG(l.ctl->writer_pid.compare_exchange_strong(expected, ::getpid()),
            "the ring already has a writer (pid " << expected << ")");
}

uint64_t RingWriter::slot_bytes() const {
  return layout_of(region_).ctl->slot_bytes;
}

uint32_t RingWriter::payload_schema() const {
  return layout_of(region_).ctl->payload_schema;
}

void RingWriter::check_peers() const {
  const Layout l = layout_of(region_);
  check_not_aborted(l.ctl);
  for (uint32_t r = 0; r < l.ctl->num_readers; ++r) {
    const pid_t pid = l.readers[r].pid.load(std::memory_order_acquire);
    if (pid != 0 && !process_alive(pid))
      throw IpcError("ring reader " + std::to_string(r) + " (pid " + std::to_string(pid) +
                     ") died while the writer waited for a free slot");
  }
  check_launcher_alive(l.ctl->launcher_pid);
}

void RingWriter::write(std::span<const uint8_t> payload) {
  const Layout l = layout_of(region_);
  RingControl* ctl = l.ctl;
  CHECK_MSG(payload.size() <= ctl->slot_bytes,
            "message of " << payload.size() << " bytes exceeds the ring's slot of "
                          << ctl->slot_bytes << " bytes (slots are sized for the largest step)");
  check_not_aborted(ctl);
  wait_bounded(
      policy_, "ring writer waiting for a free slot",
      [&](std::chrono::nanoseconds d) { return sem_wait_for(&ctl->free_slots, d); },
      [&] { check_peers(); });

  const uint64_t seq = next_sequence_++;
  const uint64_t slot = seq % ctl->slot_count;
  uint8_t* p = slot_ptr(l, slot);
  MessageHeader h{};
  h.magic = kMessageMagic;
  h.version = kRingVersion;
  h.length = static_cast<uint32_t>(payload.size());
  h.sequence = seq;
  h.checksum = XXH64(payload.data(), payload.size(), 0);
  std::memcpy(p, &h, sizeof(h));
  if (!payload.empty()) std::memcpy(p + sizeof(h), payload.data(), payload.size());

  l.slots[slot].pending.store(ctl->num_readers, std::memory_order_relaxed);
  ctl->published.store(seq + 1, std::memory_order_release);
  // sem_post is a full barrier: a reader that takes the token sees the slot's bytes.
  for (uint32_t r = 0; r < ctl->num_readers; ++r) CHECK_EQ(::sem_post(&l.readers[r].ready), 0);
}

// ---------------------------------------------------------------------------------------------

RingReader::RingReader(void* region, size_t bytes, uint32_t payload_schema, uint32_t reader_index,
                       WaitPolicy policy)
    : region_(region), index_(reader_index), policy_(policy) {
  const Layout l = checked_layout(region, bytes, payload_schema);
  CHECK_LT(reader_index, l.ctl->num_readers);
  int32_t expected = 0;
  CHECK_MSG(l.readers[reader_index].pid.compare_exchange_strong(expected, ::getpid()),
            "ring reader " << reader_index << " is already taken (pid " << expected << ")");
}

void RingReader::check_peers() const {
  const Layout l = layout_of(region_);
  check_not_aborted(l.ctl);
  const pid_t writer = l.ctl->writer_pid.load(std::memory_order_acquire);
  if (writer != 0 && !process_alive(writer))
    throw IpcError("ring writer (pid " + std::to_string(writer) + ") died; reader " +
                   std::to_string(index_) + " read " + std::to_string(next_sequence_) +
                   " messages and gets no more");
  check_launcher_alive(l.ctl->launcher_pid);
}

bool RingReader::read(std::vector<uint8_t>& out) {
  const Layout l = layout_of(region_);
  RingControl* ctl = l.ctl;
  ReaderControl& me = l.readers[index_];
  wait_bounded(
      policy_, "ring reader waiting for the next message",
      [&](std::chrono::nanoseconds d) { return sem_wait_for(&me.ready, d); },
      [&] { check_peers(); });

  const uint64_t seq = next_sequence_;
  // The writer posts a token only after publishing its message.
  CHECK_MSG(seq < ctl->published.load(std::memory_order_acquire),
            "ring reader " << index_ << " woke with no message at sequence " << seq);
  const uint64_t slot = seq % ctl->slot_count;
  const uint8_t* p = slot_ptr(l, slot);
  MessageHeader h;
  std::memcpy(&h, p, sizeof(h));
  CHECK_MSG(h.magic == kMessageMagic, "ring slot " << slot << " (sequence " << seq
                                                   << "): bad magic 0x" << std::hex << h.magic);
  CHECK_MSG(h.version == kRingVersion, "ring slot " << slot << " (sequence " << seq << "): version "
                                                    << h.version << ", this build speaks "
                                                    << kRingVersion);
  CHECK_MSG(h.sequence == seq, "ring slot " << slot << ": sequence " << h.sequence << " where "
                                            << seq << " was expected");
  CHECK_MSG(h.length <= ctl->slot_bytes,
            "ring slot " << slot << " (sequence " << seq << "): length " << h.length
                         << " exceeds the slot's " << ctl->slot_bytes << " bytes");
  const uint64_t sum = XXH64(p + sizeof(h), h.length, 0);
  CHECK_MSG(sum == h.checksum, "ring slot " << slot << " (sequence " << seq
                                            << "): checksum mismatch, header says 0x" << std::hex
                                            << h.checksum << ", payload hashes to 0x" << sum);
  out.assign(p + sizeof(h), p + sizeof(h) + h.length);

  next_sequence_ = seq + 1;
  me.consumed.store(next_sequence_, std::memory_order_relaxed);
  // The last reader to finish with a slot hands it back to the writer.
  if (l.slots[slot].pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
    CHECK_EQ(::sem_post(&ctl->free_slots), 0);
  return true;
}

}  // namespace nanovllm
