// Paged KV-cache bookkeeping with prefix caching (nano-vllm's BlockManager): fixed-size
// blocks with ref counts, a chained hash of every full block, a hash -> block map so a
// new sequence reuses the KV of an identical prefix, a FIFO free list and a used set.
// Freed blocks keep their hash and tokens so a later identical prefix revives them.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/block_hash.h"
#include "engine/free_block_queue.h"
#include "engine/sequence.h"

namespace nanovllm {

struct Block {
  int32_t block_id;
  int ref_count = 0;               // 0 = free; >= 2 = shared prefix, never written again
  std::optional<uint64_t> hash;    // set once the block is full; partial blocks have none
  std::vector<int32_t> token_ids;  // [block_size] content of a hashed block (collision guard)
  // Exact-match guard beyond the tokens: a cached block is only reused after the same parent
  // block (the previous block of the same prefix) in the same content generation, so a hash
  // collision between blocks at different positions cannot alias them either. (With FIFO
  // reuse and last-block-first release a parent is never reset before its children, so the
  // generation check is defense in depth for other eviction orders.)
  int32_t parent_block_id = -1;  // previous block of the prefix when hashed; -1 for block 0
  uint64_t parent_generation = 0;
  uint64_t generation = 0;  // bumped each time the block is reset for new content
};

// How a sequence's blocks would be served right now (no state changes).
struct PrefixMatch {
  std::vector<uint64_t> hashes;           // [num full blocks] chained hash of each full block
  std::vector<int32_t> cached_block_ids;  // [num cached blocks] leading cache hits
  int num_cached_tokens = 0;              // cached_block_ids.size() * block_size
  int num_blocks_needed = 0;              // taken from the free list: misses + revived hits
};

class BlockManager {
 public:
  // enable_prefix_caching false: no block is hashed or ever found by hash (every prompt
  // block is fresh), as vLLM's --no-enable-prefix-caching.
  BlockManager(int num_blocks, int block_size, BlockHashFn hash_fn = compute_block_hash,
               bool enable_prefix_caching = true);

  // Which leading blocks of seq hit the cache. A hit needs equal tokens and the same parent
  // block (see Block). When every block of seq would hit, the last one is reported as a
  // miss so the model still has a query token and a shared block is never written.
  // use_cache false: no hit at all (the hashes still come back, so the blocks seq fills are
  // registered for others).
  PrefixMatch match_prefix(const Sequence& seq, bool use_cache = true) const;
  // seq is a completion of the same request as `source`, which holds KV blocks (n > 1): the
  // better of match_prefix(seq) and sharing source's full prompt blocks (all but seq's last
  // block), so the prompt is computed once even without prefix caching.
  PrefixMatch match_fork(const Sequence& seq, const Sequence& source) const;
  bool can_allocate(const Sequence& seq) const;
  bool can_allocate(const PrefixMatch& match) const {
    return match.num_blocks_needed <= num_free_blocks();
  }
  // Chunked prefill: room for the blocks of seq's first `num_tokens` tokens only (at least
  // the cached ones and one more).
  bool can_allocate(const Sequence& seq, const PrefixMatch& match, int num_tokens) const;
  // Fills seq.block_table, seq.num_cached_tokens and seq.num_computed_tokens (= the cached
  // ones; seq.block_table must be empty); match from match_prefix(seq), unchanged since.
  // With num_tokens, only the blocks of seq's first num_tokens tokens (a first chunk); the
  // full ones among them are hashed, as they are computed in this step.
  void allocate(Sequence& seq);
  void allocate(Sequence& seq, const PrefixMatch& match);
  void allocate(Sequence& seq, const PrefixMatch& match, int num_tokens);
  // Releases seq's blocks (last block first, so a shared prefix stays cached longest).
  void deallocate(Sequence& seq);
  // Decode: seq just got a token; a new block is needed when that token starts one.
  bool can_append(const Sequence& seq) const { return can_grow(seq, seq.num_tokens()); }
  // Allocates that block, or hashes the last block once the new token fills it.
  void may_append(Sequence& seq) { grow(seq, seq.num_tokens()); }
  // A next chunk: the blocks of seq's first `num_tokens` tokens (it holds some already).
  bool can_grow(const Sequence& seq, int num_tokens) const;
  // How many blocks grow(seq, num_tokens) takes from the free list.
  int blocks_to_grow(const Sequence& seq, int num_tokens) const;
  // Allocates them and hashes every block full within num_tokens that has no hash yet (its
  // last tokens are computed in this step). num_tokens may count seq's pending tokens
  // (async scheduling); a block is hashed only once its tokens are known, at the next grow.
  void grow(Sequence& seq, int num_tokens);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  int num_free_blocks() const { return free_block_ids_.size(); }
  int num_used_blocks() const { return static_cast<int>(used_block_ids_.size()); }
  // Read access for invariant checks.
  const std::vector<Block>& blocks() const { return blocks_; }
  const Block& block(int32_t block_id) const { return blocks_.at(block_id); }
  bool is_free(int32_t block_id) const { return free_block_ids_.contains(block_id); }
  bool is_used(int32_t block_id) const { return used_block_ids_.count(block_id) != 0; }
  std::vector<int32_t> free_block_ids() const { return free_block_ids_.to_vector(); }
  // Block id the hash currently maps to, if any.
  std::optional<int32_t> lookup(uint64_t hash) const;

 private:
  // Block id of a valid cache hit for block `index` of a sequence, whose previous block
  // landed in parent_block_id.
  std::optional<int32_t> find_cached(uint64_t hash, std::span<const int32_t> token_ids,
                                     int32_t parent_block_id) const;
  // Hashes seq's blocks [first, last) that are full and have no hash yet, in order.
  void hash_full_blocks(const Sequence& seq, int first, int last);
  // Takes a free block for new content: drops its old hash entry, clears its content.
  int32_t allocate_fresh_block();
  // Takes a specific free block, keeping its content (revival of a cached block).
  void revive_block(int32_t block_id);
  void release_block(int32_t block_id);
  // Records block content and points the hash map at it.
  void register_hash(int32_t block_id, uint64_t hash, std::span<const int32_t> token_ids,
                     int32_t parent_block_id);

  int block_size_;
  BlockHashFn hash_fn_;
  bool prefix_caching_;
  std::vector<Block> blocks_;  // [num_blocks]
  std::unordered_map<uint64_t, int32_t> hash_to_block_id_;
  FreeBlockQueue free_block_ids_;
  std::unordered_set<int32_t> used_block_ids_;
};

}  // namespace nanovllm
