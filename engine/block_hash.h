// Chained prefix hash of one full KV block (nano-vllm's compute_hash): the hash of block i
// covers every token before it, so equal hashes mean equal prefixes (up to collisions,
// which BlockManager guards against separately).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

namespace nanovllm {

// XXH64 (seed 0) over the previous block's hash as 8 little-endian bytes (omitted for
// block 0, i.e. when prefix is empty) followed by the block's int32 token ids' bytes.
uint64_t compute_block_hash(std::optional<uint64_t> prefix, std::span<const int32_t> token_ids);

// The hash BlockManager uses; a seam so tests can force collisions.
using BlockHashFn =
    std::function<uint64_t(std::optional<uint64_t> prefix, std::span<const int32_t> token_ids)>;

}  // namespace nanovllm
