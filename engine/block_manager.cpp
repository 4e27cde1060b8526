#include "engine/block_manager.h"

#include <algorithm>

#include "kernels/check.h"

namespace nanovllm {

BlockManager::BlockManager(int num_blocks, int block_size, BlockHashFn hash_fn,
                           bool enable_prefix_caching)
    : block_size_(block_size),
      hash_fn_(std::move(hash_fn)),
      prefix_caching_(enable_prefix_caching),
      free_block_ids_(num_blocks) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(block_size, 0);
  CHECK(hash_fn_);
  blocks_.reserve(num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) blocks_.push_back(Block{.block_id = i});
}

std::optional<int32_t> BlockManager::lookup(uint64_t hash) const {
  const auto it = hash_to_block_id_.find(hash);
  if (it == hash_to_block_id_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> BlockManager::find_cached(uint64_t hash, std::span<const int32_t> token_ids,
                                                 int32_t parent_block_id) const {
  const std::optional<int32_t> id = lookup(hash);
  if (!id) return std::nullopt;
  const Block& b = blocks_[*id];
  // A stale entry or a collision: same hash, different content or different prefix.
  if (b.hash != hash ||
      !std::equal(b.token_ids.begin(), b.token_ids.end(), token_ids.begin(), token_ids.end()))
    return std::nullopt;
  if (b.parent_block_id != parent_block_id) return std::nullopt;
  if (parent_block_id >= 0 && blocks_[parent_block_id].generation != b.parent_generation)
    return std::nullopt;
  return id;
}

PrefixMatch BlockManager::match_prefix(const Sequence& seq, bool use_cache) const {
  CHECK_EQ(seq.block_size, block_size_);
  PrefixMatch match;
  const int n = seq.num_blocks();
  if (!prefix_caching_) {  // no hashes: nothing is registered, so nothing can ever hit
    match.num_blocks_needed = n;
    return match;
  }
  std::optional<uint64_t> prefix;
  int32_t parent = -1;
  bool missed = !use_cache;  // without the cache: every block a miss, hashes still computed
  int num_revived = 0;
  for (int i = 0; i < n; ++i) {
    const std::span<const int32_t> tokens = seq.block(i);
    if (static_cast<int>(tokens.size()) != block_size_) break;  // partial last block: no hash
    const uint64_t h = hash_fn_(prefix, tokens);
    match.hashes.push_back(h);
    prefix = h;
    if (missed) continue;
    std::optional<int32_t> hit = find_cached(h, tokens, parent);
    // Every block cached: recompute the last one so the model has a query.
    if (hit && i == n - 1) hit.reset();
    if (!hit) {
      missed = true;
      continue;
    }
    match.cached_block_ids.push_back(*hit);
    if (blocks_[*hit].ref_count == 0) ++num_revived;
    parent = *hit;
  }
  const int num_cached = static_cast<int>(match.cached_block_ids.size());
  match.num_cached_tokens = num_cached * block_size_;
  match.num_blocks_needed = (n - num_cached) + num_revived;
  return match;
}

PrefixMatch BlockManager::match_fork(const Sequence& seq, const Sequence& source) const {
  CHECK_EQ(seq.request_id, source.request_id);
  CHECK_EQ(seq.num_prompt_tokens, source.num_prompt_tokens);
  PrefixMatch match = match_prefix(seq);
  // Full prompt blocks only (a completion's own tokens follow), and never seq's last block:
  // the model needs a query token, and a shared block is never written.
  // Only blocks whose KV exists by the end of this step (source's chunk may stop mid-block).
  const int source_kv = source.num_computed_tokens + source.num_scheduled_tokens;
  const int shared = std::min(
      {seq.num_prompt_tokens / block_size_, seq.num_blocks() - 1, source_kv / block_size_});
  if (shared * block_size_ <= match.num_cached_tokens) return match;
  // Source's blocks are in use (ref_count >= 1): shared, never revived from the free list.
  match.cached_block_ids.assign(source.block_table.begin(), source.block_table.begin() + shared);
  match.num_cached_tokens = shared * block_size_;
  match.num_blocks_needed = seq.num_blocks() - shared;
  return match;
}

bool BlockManager::can_allocate(const Sequence& seq) const {
  return can_allocate(match_prefix(seq));
}

void BlockManager::allocate(Sequence& seq) {
  allocate(seq, match_prefix(seq));
}

void BlockManager::allocate(Sequence& seq, const PrefixMatch& match) {
  allocate(seq, match, seq.num_tokens());
}

namespace {
int blocks_for(int num_tokens, int block_size) {
  return (num_tokens + block_size - 1) / block_size;
}
}  // namespace

bool BlockManager::can_allocate(const Sequence& seq, const PrefixMatch& match,
                                int num_tokens) const {
  const int num_cached = static_cast<int>(match.cached_block_ids.size());
  // Revived hits count too: they leave the free list (match's total less its fresh blocks).
  const int revived = match.num_blocks_needed - (seq.num_blocks() - num_cached);
  const int fresh = blocks_for(num_tokens, block_size_) - num_cached;
  return fresh + revived <= num_free_blocks();
}

void BlockManager::allocate(Sequence& seq, const PrefixMatch& match, int num_tokens) {
  CHECK(seq.block_table.empty());
  CHECK(can_allocate(seq, match, num_tokens));
  const int n = blocks_for(num_tokens, block_size_);
  const int num_cached = static_cast<int>(match.cached_block_ids.size());
  CHECK_LT(match.num_cached_tokens, num_tokens);
  CHECK_LE(num_tokens, seq.num_tokens());
  CHECK_LE(static_cast<int>(match.hashes.size()), seq.num_blocks());
  // Hits first: revived blocks must leave the free list before fresh blocks are taken from it.
  for (const int32_t id : match.cached_block_ids) {
    Block& b = blocks_[id];
    if (b.ref_count == 0) {
      revive_block(id);
    } else {
      ++b.ref_count;  // shared prefix
    }
    seq.block_table.push_back(id);
  }
  for (int i = num_cached; i < n; ++i) {
    const int32_t id = allocate_fresh_block();
    // Only blocks whose every token is computed by this step are findable by others.
    if (i < static_cast<int>(match.hashes.size()) && (i + 1) * block_size_ <= num_tokens) {
      const int32_t parent = i > 0 ? seq.block_table[i - 1] : -1;
      register_hash(id, match.hashes[i], seq.block(i), parent);
    }
    seq.block_table.push_back(id);
  }
  seq.num_cached_tokens = match.num_cached_tokens;
  seq.num_computed_tokens = match.num_cached_tokens;
}

void BlockManager::deallocate(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& b = blocks_[*it];
    CHECK_GT(b.ref_count, 0);
    if (--b.ref_count == 0) release_block(*it);
  }
  seq.block_table.clear();
  seq.num_cached_tokens = 0;
  seq.num_computed_tokens = 0;
}

int BlockManager::blocks_to_grow(const Sequence& seq, int num_tokens) const {
  return std::max(blocks_for(num_tokens, block_size_) - static_cast<int>(seq.block_table.size()),
                  0);
}

bool BlockManager::can_grow(const Sequence& seq, int num_tokens) const {
  return num_free_blocks() >= blocks_to_grow(seq, num_tokens);
}

void BlockManager::grow(Sequence& seq, int num_tokens) {
  std::vector<int32_t>& table = seq.block_table;
  CHECK(!table.empty());
  CHECK_LE(num_tokens, seq.num_tokens() + seq.num_pending_tokens);
  // Every block before the last one held is full and hashed; the last may fill up now (or, a
  // pending token having filled it, once that token is known).
  const int first = static_cast<int>(table.size()) - 1;
  while (static_cast<int>(table.size()) < blocks_for(num_tokens, block_size_))
    table.push_back(allocate_fresh_block());
  if (prefix_caching_)
    hash_full_blocks(seq, first, std::min(num_tokens, seq.num_tokens()) / block_size_);
}

void BlockManager::hash_full_blocks(const Sequence& seq, int first, int last) {
  for (int i = std::max(first, 0); i < last; ++i) {
    const int32_t id = seq.block_table[i];
    if (blocks_[id].hash) continue;
    const int32_t parent = i > 0 ? seq.block_table[i - 1] : -1;
    std::optional<uint64_t> prefix;
    if (parent >= 0) {
      prefix = blocks_[parent].hash;
      CHECK(prefix.has_value());
    }
    const std::span<const int32_t> tokens = seq.block(i);
    CHECK_EQ(static_cast<int>(tokens.size()), block_size_);
    register_hash(id, hash_fn_(prefix, tokens), tokens, parent);
  }
}

int32_t BlockManager::allocate_fresh_block() {
  const int32_t id = free_block_ids_.front();
  Block& b = blocks_[id];
  CHECK_EQ(b.ref_count, 0);
  if (b.hash) {
    // New content: the old prefix is gone, unless the map already moved on to another block.
    const auto it = hash_to_block_id_.find(*b.hash);
    if (it != hash_to_block_id_.end() && it->second == id) hash_to_block_id_.erase(it);
  }
  b.hash.reset();
  b.token_ids.clear();
  b.parent_block_id = -1;
  b.parent_generation = 0;
  ++b.generation;
  free_block_ids_.remove(id);
  used_block_ids_.insert(id);
  b.ref_count = 1;
  return id;
}

void BlockManager::revive_block(int32_t block_id) {
  Block& b = blocks_[block_id];
  CHECK_EQ(b.ref_count, 0);
  free_block_ids_.remove(block_id);
  used_block_ids_.insert(block_id);
  b.ref_count = 1;
}

void BlockManager::release_block(int32_t block_id) {
  CHECK_EQ(used_block_ids_.erase(block_id), 1u);
  free_block_ids_.push_back(block_id);
}

void BlockManager::register_hash(int32_t block_id, uint64_t hash,
                                 std::span<const int32_t> token_ids, int32_t parent_block_id) {
  Block& b = blocks_[block_id];
  CHECK_EQ(static_cast<int>(token_ids.size()), block_size_);
  b.hash = hash;
  b.token_ids.assign(token_ids.begin(), token_ids.end());
  b.parent_block_id = parent_block_id;
  b.parent_generation = parent_block_id >= 0 ? blocks_[parent_block_id].generation : 0;
  hash_to_block_id_[hash] = block_id;
}

}  // namespace nanovllm
