// A step-command ring in this process's memory with one reader: rank 0's writer and a worker's
// reader side by side, for tests of what crosses the ring without forking.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ipc/broadcast_ring.h"
#include "ipc/step_command.h"

namespace nanovllm::test {

struct LocalCommandRing {
  explicit LocalCommandRing(uint32_t slot_count = 4)
      : config{.num_readers = 1,
               .slot_count = slot_count,
               .slot_bytes = 64 * 1024,
               .payload_schema = kStepCommandSchemaVersion},
        region(ring_region_bytes(config) + 64) {
    // The ring's header wants 64-byte alignment.
    void* base = region.data() + (64 - reinterpret_cast<uintptr_t>(region.data()) % 64) % 64;
    ring_init(base, ring_region_bytes(config), config);
    writer =
        std::make_unique<RingWriter>(base, ring_region_bytes(config), kStepCommandSchemaVersion);
    reader =
        std::make_unique<RingReader>(base, ring_region_bytes(config), kStepCommandSchemaVersion, 0);
  }
  RingConfig config;
  std::vector<uint8_t> region;
  std::unique_ptr<RingWriter> writer;
  std::unique_ptr<RingReader> reader;
};

}  // namespace nanovllm::test
