#include "ipc/shm_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "ipc/ipc_error.h"
#include "ipc/liveness.h"
#include "kernels/bf16.h"
#include "kernels/check.h"

namespace nanovllm {
namespace {

constexpr uint32_t kCommMagic = 0x4d4f434e;  // "NCOM" little-endian
constexpr int kMaxWorld = 256;

// Region layout (64-byte aligned parts):
//   CommControl               once
//   area                      [world_size][area_bytes]   rank r's staging area
struct alignas(64) CommControl {
  uint32_t magic;
  int32_t world_size;
  uint64_t area_bytes;
  int32_t launcher_pid;
  std::atomic<uint32_t> aborted;
  alignas(64) std::atomic<uint32_t> arrived;         // ranks in the current barrier
  alignas(64) std::atomic<uint32_t> generation;      // bumped when a barrier completes (futex word)
  alignas(64) std::atomic<int32_t> pids[kMaxWorld];  // 0 until rank r registers
};

CommControl* control(void* region) {
  return static_cast<CommControl*>(region);
}

float load_as_f32(const uint8_t* p, DType t, size_t i) {
  switch (t) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::kBf16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return bf16_to_float(v);
    }
    case DType::kF16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return f16_to_float(v);
    }
    default:
      break;
  }
  CHECK_MSG(false, "all_reduce_sum of dtype " << dtype_name(t));
  return 0.0f;
}

// float -> IEEE half, round to nearest even (only for F16 all-reduce results).
uint16_t float_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {                                         // subnormal or zero in half
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // * 2^24: half ulp units
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t h = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

void store_from_f32(uint8_t* p, DType t, size_t i, float v) {
  switch (t) {
    case DType::kF32:
      std::memcpy(p + 4 * i, &v, 4);
      return;
    case DType::kBf16: {
      const uint16_t h = float_to_bf16(v);
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    case DType::kF16: {
      const uint16_t h = float_to_f16(v);
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    default:
      CHECK_MSG(false, "all_reduce_sum of dtype " << dtype_name(t));
  }
}

}  // namespace

size_t shm_communicator_region_bytes(int world_size, size_t max_elems) {
  const size_t area = (max_elems * sizeof(float) + 63) / 64 * 64;
  return sizeof(CommControl) + static_cast<size_t>(world_size) * area;
}

void shm_communicator_init(void* region, size_t bytes, int world_size, size_t max_elems) {
  CHECK(region != nullptr);
  CHECK_MSG(reinterpret_cast<uintptr_t>(region) % 64 == 0,
            "communicator region must be 64-byte aligned");
  CHECK_MSG(world_size >= 1 && world_size <= kMaxWorld, "world_size " << world_size);
  CHECK_GE(max_elems, size_t{1});
  CHECK_LE(shm_communicator_region_bytes(world_size, max_elems), bytes);
  auto* c = new (region) CommControl{};
  c->world_size = world_size;
  c->area_bytes = (max_elems * sizeof(float) + 63) / 64 * 64;
  c->launcher_pid = static_cast<int32_t>(::getpid());
  std::atomic_thread_fence(std::memory_order_release);
  c->magic = kCommMagic;
}

ShmCommunicator::ShmCommunicator(void* region, size_t bytes, int rank, WaitPolicy policy)
    : region_(region), rank_(rank), policy_(policy) {
  CHECK(region != nullptr);
  CommControl* c = control(region);
  CHECK_MSG(c->magic == kCommMagic, "shared memory holds no initialised communicator");
  world_size_ = c->world_size;
  area_bytes_ = c->area_bytes;
  CHECK_LE(shm_communicator_region_bytes(world_size_, area_bytes_ / sizeof(float)), bytes);
  CHECK_MSG(rank >= 0 && rank < world_size_, "rank " << rank << " of world " << world_size_);
  int32_t expected = 0;
  CHECK_MSG(c->pids[rank].compare_exchange_strong(expected, ::getpid()),
            "communicator rank " << rank << " already taken by pid " << expected);
}

uint8_t* ShmCommunicator::area(int r) const {
  return static_cast<uint8_t*>(region_) + sizeof(CommControl) +
         static_cast<size_t>(r) * area_bytes_;
}

void ShmCommunicator::abort() {
  control(region_)->aborted.store(1, std::memory_order_release);
  futex_wake_all(&control(region_)->generation);
}

void ShmCommunicator::check_peers() const {
  CommControl* c = control(region_);
  if (c->aborted.load(std::memory_order_acquire) != 0)
    throw IpcError("communicator aborted: another rank failed");
  for (int r = 0; r < world_size_; ++r) {
    const pid_t pid = c->pids[r].load(std::memory_order_acquire);
    if (r != rank_ && pid != 0 && !process_alive(pid))
      throw IpcError("communicator: rank " + std::to_string(r) + " (pid " + std::to_string(pid) +
                     ") died; rank " + std::to_string(rank_) + " stops waiting for it");
  }
  check_launcher_alive(c->launcher_pid);
}

// Generation barrier: the last rank to arrive resets the count, then bumps the generation
// (so a rank that races into the next barrier counts from zero) and wakes the waiters.
void ShmCommunicator::barrier() {
  CommControl* c = control(region_);
  if (c->aborted.load(std::memory_order_acquire) != 0)
    throw IpcError("communicator aborted: another rank failed");
  const uint32_t gen = c->generation.load(std::memory_order_acquire);
  if (c->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 ==
      static_cast<uint32_t>(world_size_)) {
    c->arrived.store(0, std::memory_order_relaxed);
    c->generation.fetch_add(1, std::memory_order_release);
    futex_wake_all(&c->generation);
    return;
  }
  // Spin briefly (the peers are usually a few microseconds behind), then sleep on the futex.
  for (int i = 0; i < 2000; ++i)
    if (c->generation.load(std::memory_order_acquire) != gen) return;
  wait_bounded(
      policy_, "communicator barrier",
      [&](std::chrono::nanoseconds d) {
        if (c->generation.load(std::memory_order_acquire) != gen) return true;
        futex_wait_for(&c->generation, gen, d);
        return c->generation.load(std::memory_order_acquire) != gen;
      },
      [&] { check_peers(); });
}

void ShmCommunicator::all_reduce_sum(const TensorView& inout, const ExecContext&) {
  CHECK_MSG(inout.on_cpu() && inout.is_contiguous(),
            "ShmCommunicator needs a contiguous CPU tensor, got " << inout.shape_str());
  const DType t = inout.dtype;
  CHECK_MSG(t == DType::kF32 || t == DType::kBf16 || t == DType::kF16,
            "all_reduce_sum of dtype " << dtype_name(t));
  if (world_size_ == 1) return;
  const size_t esize = dtype_size(t);
  const size_t n = static_cast<size_t>(inout.numel());
  const size_t chunk = area_bytes_ / esize;  // areas hold the caller's dtype as is
  auto* data = static_cast<uint8_t*>(inout.data);
  for (size_t begin = 0; begin < n; begin += chunk) {
    const size_t len = std::min(chunk, n - begin);
    std::memcpy(area(rank_), data + begin * esize, len * esize);
    barrier();  // every area holds this chunk
    if (t == DType::kF32) {
      sum_areas_f32(begin, len, reinterpret_cast<float*>(data));
    } else {
      for (size_t i = 0; i < len; ++i) {
        float sum = load_as_f32(area(0), t, i);
        for (int r = 1; r < world_size_; ++r) sum += load_as_f32(area(r), t, i);
        store_from_f32(data, t, begin + i, sum);
      }
    }
    barrier();  // nobody overwrites an area another rank still reads
  }
}

// F32 fast path: same order of additions, vectorisable across elements.
void ShmCommunicator::sum_areas_f32(size_t begin, size_t len, float* out) const {
  float* dst = out + begin;
  std::memcpy(dst, area(0), len * sizeof(float));
  for (int r = 1; r < world_size_; ++r) {
    const auto* src = reinterpret_cast<const float*>(area(r));
    for (size_t i = 0; i < len; ++i) dst[i] += src[i];
  }
}

int64_t ShmCommunicator::all_reduce_min(int64_t value, const ExecContext&) {
  if (world_size_ == 1) return value;
  // Areas hold at least 64 bytes (init rounds them up), so one int64 always fits.
  std::memcpy(area(rank_), &value, sizeof(value));
  barrier();  // every area holds its rank's value
  int64_t smallest = value;
  for (int r = 0; r < world_size_; ++r) {
    int64_t v = 0;
    std::memcpy(&v, area(r), sizeof(v));
    smallest = std::min(smallest, v);
  }
  barrier();  // nobody overwrites an area another rank still reads
  return smallest;
}

void ShmCommunicator::gather_to_root(const TensorView& send, const TensorView& recv,
                                     const ExecContext&) {
  CHECK_MSG(send.on_cpu() && send.is_contiguous(),
            "ShmCommunicator needs a contiguous CPU tensor, got " << send.shape_str());
  const size_t bytes = send.nbytes();
  if (rank_ == 0) {
    CHECK_MSG(recv.on_cpu() && recv.is_contiguous() && recv.dtype == send.dtype &&
                  recv.nbytes() == bytes * static_cast<size_t>(world_size_),
              "gather_to_root: recv " << recv.shape_str() << " for send " << send.shape_str()
                                      << " on " << world_size_ << " ranks");
  }
  const auto* src = static_cast<const uint8_t*>(send.data);
  for (size_t begin = 0; begin < bytes || (bytes == 0 && begin == 0); begin += area_bytes_) {
    const size_t len = std::min<size_t>(area_bytes_, bytes - begin);
    if (rank_ != 0) std::memcpy(area(rank_), src + begin, len);
    barrier();
    if (rank_ == 0) {
      auto* dst = static_cast<uint8_t*>(recv.data);
      std::memcpy(dst + begin, src + begin, len);
      for (int r = 1; r < world_size_; ++r) std::memcpy(dst + r * bytes + begin, area(r), len);
    }
    barrier();
    if (bytes == 0) break;
  }
}

}  // namespace nanovllm
