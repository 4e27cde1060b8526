#include "engine/block_hash.h"

#include <bit>
#include <cstring>

#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t on the stack: no allocation per block
#include <xxhash.h>

#include "kernels/check.h"

namespace nanovllm {

// Token bytes and the prefix bytes are hashed in host order; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "block hash assumes little-endian");

uint64_t compute_block_hash(std::optional<uint64_t> prefix, std::span<const int32_t> token_ids) {
  XXH64_state_t state;
  CHECK(XXH64_reset(&state, 0) == XXH_OK);
  if (prefix) {
    unsigned char bytes[sizeof(uint64_t)];  // [8] little-endian prefix hash
    std::memcpy(bytes, &*prefix, sizeof(bytes));
    CHECK(XXH64_update(&state, bytes, sizeof(bytes)) == XXH_OK);
  }
  CHECK(XXH64_update(&state, token_ids.data(), token_ids.size_bytes()) == XXH_OK);
  return XXH64_digest(&state);
}

}  // namespace nanovllm
