// One-writer / N-reader broadcast ring in shared memory: rank 0 writes each step command
// once, every reader (ranks 1..N-1) sees every message exactly once and in order. Fixed slots
// sized at start-up; when all slots hold unread messages the writer waits for the slowest
// reader. Protocol, layout and failure behaviour: ipc/README.md (normative).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ipc/bounded_wait.h"

namespace nanovllm {

struct RingConfig {
  uint32_t num_readers = 1;       // >= 1 (tp 1 runs without a ring)
  uint32_t slot_count = 8;        // >= 1
  uint64_t slot_bytes = 1 << 20;  // payload capacity of one slot (largest message)
  // What the payloads are, in the creator's numbering (step commands:
  // kStepCommandSchemaVersion). The ring never reads payloads; it only refuses an attach that
  // expects another schema, so two builds never misread each other's messages.
  uint32_t payload_schema = 0;
};

// Written at the start of every slot; the payload follows. 32 bytes.
struct MessageHeader {
  uint32_t magic;      // kMessageMagic
  uint16_t version;    // kRingVersion
  uint16_t reserved;   // 0
  uint32_t length;     // payload bytes, <= slot_bytes
  uint32_t reserved2;  // 0
  uint64_t sequence;   // 0, 1, 2, ... over the ring's life; slot = sequence % slot_count
  uint64_t checksum;   // XXH64(payload, length, seed 0)
};
static_assert(sizeof(MessageHeader) == 32);

inline constexpr uint32_t kRingMagic = 0x4752564e;     // "NVRG" little-endian
inline constexpr uint32_t kMessageMagic = 0x534d564e;  // "NVMS" little-endian
inline constexpr uint16_t kRingVersion = 2;            // 2: RingControl carries payload_schema
inline constexpr uint32_t kMaxRingReaders = 255;

// Bytes the ring needs for `config` (a multiple of 64).
size_t ring_region_bytes(const RingConfig& config);
// Lays the ring out in `region` (zeroed shared memory of >= ring_region_bytes bytes) and
// initialises its process-shared semaphores. Called once, by the launcher, before fork; the
// caller's pid is recorded as the launcher that every waiter watches.
void ring_init(void* region, size_t bytes, const RingConfig& config);
// Makes every current and future wait on this ring throw IpcError("ring aborted").
void ring_abort(void* region);
// Raw bytes of slot `slot` (MessageHeader, then payload): for tests and debugging.
uint8_t* ring_slot_bytes(void* region, uint32_t slot);

// Both ends attach with the payload schema they speak; a ring created with another one is
// refused (CHECK failure naming both numbers) before anything is registered.
class RingWriter {
 public:
  // Registers the calling process as the writer (readers watch its pid).
  RingWriter(void* region, size_t bytes, uint32_t payload_schema, WaitPolicy policy = {});

  // Copies `payload` into the next slot and publishes it to every reader; waits while the
  // ring is full. A payload larger than slot_bytes is a sizing bug: CHECK failure.
  // Throws IpcError when a registered reader or the launcher died, or on timeout/abort.
  void write(std::span<const uint8_t> payload);

  uint64_t messages_written() const { return next_sequence_; }
  uint64_t slot_bytes() const;
  uint32_t payload_schema() const;

 private:
  void check_peers() const;
  void* region_;
  WaitPolicy policy_;
  uint64_t next_sequence_ = 0;
};

class RingReader {
 public:
  // Registers the calling process as reader `reader_index` (0-based, < num_readers).
  RingReader(void* region, size_t bytes, uint32_t payload_schema, uint32_t reader_index,
             WaitPolicy policy = {});

  // Waits for the next message and copies it into `out`; always returns true (the stream has
  // no end marker of its own: ranks stop on an EXIT step command). Throws IpcError when the
  // writer (or the launcher) died, on timeout or abort; a slot with a bad header or checksum
  // is a CHECK failure naming the slot and what is wrong.
  bool read(std::vector<uint8_t>& out);

  uint64_t messages_read() const { return next_sequence_; }

 private:
  void check_peers() const;
  void* region_;
  uint32_t index_;
  WaitPolicy policy_;
  uint64_t next_sequence_ = 0;
};

}  // namespace nanovllm
