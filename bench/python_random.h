// CPython's `random` module, the part the benchmark's workloads draw with: MT19937 seeded as
// `random.seed(n)` seeds it for a non-negative int n (init_by_array over n's 32-bit words,
// least significant first; n = 0 is the one word 0), `getrandbits(k)` and `randint(a, b)`
// (= a + _randbelow(b - a + 1): k = bit_length(n) bits by getrandbits(k), redrawn while
// >= n). So a workload drawn by a Python script (nano-vllm's bench.py) is reproduced here
// number for number, with no Python and no committed file. Header only.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace nanovllm::bench {

class PythonRandom {
 public:
  // random.seed(seed) for an int seed >= 0.
  explicit PythonRandom(uint64_t seed = 0) {
    std::vector<uint32_t> key;
    for (uint64_t n = seed; n != 0; n >>= 32) key.push_back(static_cast<uint32_t>(n));
    if (key.empty()) key.push_back(0);
    init_by_array(key);
  }

  // MT19937's next 32-bit output (CPython's genrand_uint32).
  uint32_t genrand_uint32() {
    if (index_ >= kN) twist();
    uint32_t y = state_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

  // random.getrandbits(k), 0 < k <= 64: 32-bit words least significant first, the last
  // one's top bits.
  uint64_t getrandbits(int k) {
    if (k <= 0 || k > 64) throw std::invalid_argument("getrandbits: k must be in [1, 64]");
    if (k <= 32) return genrand_uint32() >> (32 - k);
    const uint64_t low = genrand_uint32();
    const uint64_t high = genrand_uint32() >> (64 - k);
    return low | (high << 32);
  }

  // random.randint(a, b): a <= result <= b (b - a < 2^63).
  int64_t randint(int64_t a, int64_t b) {
    if (b < a) throw std::invalid_argument("randint: empty range");
    return a + static_cast<int64_t>(randbelow(static_cast<uint64_t>(b - a) + 1));
  }

 private:
  static constexpr int kN = 624, kM = 397;

  // random._randbelow_with_getrandbits(n), n >= 1.
  uint64_t randbelow(uint64_t n) {
    const int k = std::bit_width(n);
    uint64_t r = getrandbits(k);
    while (r >= n) r = getrandbits(k);
    return r;
  }

  void init_genrand(uint32_t s) {
    state_[0] = s;
    for (int i = 1; i < kN; ++i)
      state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
    index_ = kN;
  }

  void init_by_array(const std::vector<uint32_t>& key) {
    init_genrand(19650218u);
    const int key_length = static_cast<int>(key.size());
    int i = 1, j = 0;
    for (int k = kN > key_length ? kN : key_length; k > 0; --k) {
      state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525u)) + key[j] +
                  static_cast<uint32_t>(j);
      ++i;
      ++j;
      if (i >= kN) {
        state_[0] = state_[kN - 1];
        i = 1;
      }
      if (j >= key_length) j = 0;
    }
    for (int k = kN - 1; k > 0; --k) {
      state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941u)) -
                  static_cast<uint32_t>(i);
      ++i;
      if (i >= kN) {
        state_[0] = state_[kN - 1];
        i = 1;
      }
    }
    state_[0] = 0x80000000u;  // MSB is 1, assuring a non-zero initial array
  }

  void twist() {
    constexpr uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrixA = 0x9908b0dfu;
    for (int i = 0; i < kN; ++i) {
      const uint32_t y = (state_[i] & kUpper) | (state_[(i + 1) % kN] & kLower);
      state_[i] = state_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    }
    index_ = 0;
  }

  std::array<uint32_t, kN> state_{};
  int index_ = kN;
};

}  // namespace nanovllm::bench
