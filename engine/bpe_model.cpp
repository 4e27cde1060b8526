#include "engine/bpe_model.h"

#include <algorithm>
#include <bit>

#include "engine/tokenizer_byte_level.h"
#include "engine/tokenizer_error.h"
#include "engine/tokenizer_utf8.h"

namespace nanovllm {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
}

uint64_t mix(uint64_t k) {  // splitmix64 finalizer: spreads the two ids over all bits
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ULL;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebULL;
  return k ^ (k >> 31);
}

// One candidate merge of the symbols at `left` and its right neighbour.
struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index of the left part (word position: ties go leftmost)
  int32_t new_id;
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

BpeModel::BpeModel(const std::vector<std::pair<std::string, int32_t>>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges) {
  int32_t limit = 0;
  for (const auto& [token, id] : vocab) {
    if (id < 0) throw TokenizerError("vocab entry '" + token + "' has a negative id");
    limit = std::max(limit, id + 1);
  }
  id_to_token_.resize(limit);
  token_to_id_.reserve(vocab.size());
  for (const auto& [token, id] : vocab) {
    id_to_token_[id] = token;
    token_to_id_.emplace(token, id);
  }
  const auto& alphabet = byte_level_alphabet();
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(alphabet[b], ch);
    const auto id = token_to_id(ch);
    if (!id) throw TokenizerError("vocab lacks the byte-level token for byte " + std::to_string(b));
    byte_to_id_[b] = *id;
  }
  const size_t slots = std::bit_ceil(std::max<size_t>(16, merges.size() * 2));
  merge_table_.assign(slots, MergeSlot{kEmptyKey, 0, 0});
  merge_mask_ = slots - 1;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [l, r] = merges[rank];
    const auto left = token_to_id(l), right = token_to_id(r), merged = token_to_id(l + r);
    if (!left || !right || !merged) {
      throw TokenizerError("merge " + std::to_string(rank) + " ('" + l + "' '" + r +
                           "') uses a token missing from the vocab");
    }
    // A repeated pair keeps its first (lowest) rank.
    if (!find_merge(*left, *right)) insert_merge(*left, *right, int32_t(rank), *merged);
  }
}

BpeModel::BpeModel(BpeModel&& o) noexcept
    : id_to_token_(std::move(o.id_to_token_)),
      token_to_id_(std::move(o.token_to_id_)),
      merge_table_(std::move(o.merge_table_)),
      merge_mask_(o.merge_mask_),
      cache_(std::move(o.cache_)) {
  std::copy(std::begin(o.byte_to_id_), std::end(o.byte_to_id_), byte_to_id_);
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = token_to_id_.find(token);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    const MergeSlot& s = merge_table_[i];
    if (s.key == key) return &s;
    if (s.key == kEmptyKey) return nullptr;
  }
}

void BpeModel::insert_merge(int32_t left, int32_t right, int32_t rank, int32_t new_id) {
  const uint64_t key = pair_key(left, right);
  uint64_t i = mix(key) & merge_mask_;
  while (merge_table_[i].key != kEmptyKey) i = (i + 1) & merge_mask_;
  merge_table_[i] = MergeSlot{key, rank, new_id};
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_to_id_[static_cast<uint8_t>(word[0])]);
    return;
  }
  {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  std::lock_guard lock(cache_mutex_);
  if (cache_.size() < kCacheCapacity) {
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

// Hugging Face's order: repeatedly merge the lowest-ranked adjacent pair, leftmost first.
// A min-heap of candidates keeps this O(n log n) for long words; stale candidates (a side
// already merged away or changed) are skipped when popped.
void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<int32_t> id(n), prev(n), next(n);  // linked list of symbols; [n] each
  for (int32_t i = 0; i < n; ++i) {
    id[i] = byte_to_id_[static_cast<uint8_t>(word[i])];
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<Candidate> heap;
  heap.reserve(n);
  auto push = [&](int32_t left) {
    const int32_t right = next[left];
    if (right < 0) return;
    if (const MergeSlot* m = find_merge(id[left], id[right])) {
      heap.push_back({m->rank, left, m->new_id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate c = heap.back();
    heap.pop_back();
    const int32_t left = c.left;
    if (id[left] < 0) continue;  // merged into its left neighbour meanwhile
    const int32_t right = next[left];
    if (right < 0) continue;
    const MergeSlot* m = find_merge(id[left], id[right]);
    if (!m || m->new_id != c.new_id) continue;  // one side changed since it was pushed
    id[left] = c.new_id;
    id[right] = -1;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    if (prev[left] >= 0) push(prev[left]);
    push(left);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(id[i]);
}

}  // namespace nanovllm
