// The block manager's free list: FIFO over block ids (allocate from the front, release to
// the back, so the longest-freed cached block is reused first and recently freed prefixes
// survive longest), plus O(1) removal from the middle for a revived cached block. A
// doubly linked list threaded through two arrays indexed by block id.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/check.h"

namespace nanovllm {

class FreeBlockQueue {
 public:
  // Starts with every block 0..num_blocks-1 free, in id order.
  explicit FreeBlockQueue(int num_blocks)
      : prev_(num_blocks + 1), next_(num_blocks + 1), in_queue_(num_blocks, true) {
    // Index num_blocks is the sentinel; ids link in a ring through it.
    const int32_t s = num_blocks;
    for (int32_t i = 0; i <= s; ++i) {
      prev_[i] = i == 0 ? s : i - 1;
      next_[i] = i == s ? 0 : i + 1;
    }
    if (num_blocks == 0) prev_[s] = next_[s] = s;
    size_ = num_blocks;
  }

  int size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(int32_t block_id) const { return in_queue_.at(block_id); }
  int32_t front() const {
    CHECK(!empty());
    return next_[sentinel()];
  }

  void push_back(int32_t block_id) {
    CHECK(!contains(block_id));
    const int32_t last = prev_[sentinel()];
    next_[last] = block_id;
    prev_[block_id] = last;
    next_[block_id] = sentinel();
    prev_[sentinel()] = block_id;
    in_queue_[block_id] = true;
    ++size_;
  }

  void remove(int32_t block_id) {
    CHECK(contains(block_id));
    next_[prev_[block_id]] = next_[block_id];
    prev_[next_[block_id]] = prev_[block_id];
    in_queue_[block_id] = false;
    --size_;
  }

  // Block ids front to back (for invariant checks and tests).
  std::vector<int32_t> to_vector() const {
    std::vector<int32_t> ids;
    for (int32_t i = next_[sentinel()]; i != sentinel(); i = next_[i]) ids.push_back(i);
    return ids;
  }

 private:
  int32_t sentinel() const { return static_cast<int32_t>(in_queue_.size()); }

  std::vector<int32_t> prev_;   // [num_blocks + 1] previous id in the ring
  std::vector<int32_t> next_;   // [num_blocks + 1] next id in the ring
  std::vector<bool> in_queue_;  // [num_blocks]
  int size_ = 0;
};

}  // namespace nanovllm
