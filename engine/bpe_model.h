// Byte-level BPE (the "model" of tokenizer.json): turns one pre-tokenized word, given as raw
// bytes, into vocab ids by applying the merge list in rank order. Results are cached per word
// because natural text repeats the same words over and over.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nanovllm {

class BpeModel {
 public:
  // vocab: byte-level token string -> id; merges: (left, right) token strings in rank order.
  // Throws TokenizerError naming the entry when the vocab lacks a byte or a merge's parts.
  BpeModel(const std::vector<std::pair<std::string, int32_t>>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges);
  BpeModel(BpeModel&& other) noexcept;
  BpeModel& operator=(BpeModel&&) = delete;
  BpeModel(const BpeModel&) = delete;

  // Appends the ids of one word (raw bytes, non-empty). Thread-safe.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  // One past the largest vocab id.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  // Byte-level token string of an id; empty for an unused id.
  const std::string& id_to_token(int32_t id) const { return id_to_token_[id]; }
  std::optional<int32_t> token_to_id(std::string_view token) const;

 private:
  struct MergeSlot {
    uint64_t key;    // (left id << 32) | right id; kEmptyKey when unused
    int32_t rank;    // position in the merge list: lower merges first
    int32_t new_id;  // id of the merged token
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};

  const MergeSlot* find_merge(int32_t left, int32_t right) const;
  void insert_merge(int32_t left, int32_t right, int32_t rank, int32_t new_id);
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::vector<std::string> id_to_token_;  // [id_limit]
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> token_to_id_;
  int32_t byte_to_id_[256];             // id of the single-byte token of each byte value
  std::vector<MergeSlot> merge_table_;  // open addressing, power-of-two size
  uint64_t merge_mask_ = 0;

  // Per-word cache: raw word bytes -> ids. Capped; once full it stops growing.
  static constexpr size_t kCacheCapacity = 1 << 18;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace nanovllm
