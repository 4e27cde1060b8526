#include "rank/nccl_communicator.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <utility>

#include "kernels/check.h"

// An NCCL call on this communicator: nonblocking, so ncclInProgress is waited out, not failed.
#define NCCL_COMPLETE(dog, call) complete((dog), (call), #call, __FILE__, __LINE__)

namespace nanovllm {
namespace {

ncclDataType_t nccl_float_type(DType t) {
  switch (t) {
    case DType::kBf16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kF32:
      return ncclFloat32;
    default:
      break;
  }
  CHECK_MSG(false, "all_reduce_sum of dtype " << dtype_name(t));
  return ncclFloat32;
}

int64_t* allocate_pinned_int64() {
  void* p = nullptr;
  CUDA_CHECK(cudaMallocHost(&p, sizeof(int64_t)));
  return static_cast<int64_t*>(p);
}

void free_pinned(int64_t* p) {
  cudaFreeHost(p);
}

int checked_world_size(int rank, int world_size) {
  CHECK_MSG(world_size >= 1 && rank >= 0 && rank < world_size,
            "rank " << rank << " of world " << world_size);
  return world_size;
}

void check_device_tensor(const TensorView& t, const char* what) {
  CHECK_MSG(!t.on_cpu() && t.is_contiguous(),
            what << " over NCCL needs a contiguous CUDA tensor, got " << t.shape_str());
}

}  // namespace

ncclUniqueId NcclCommunicator::create_unique_id() {
  ncclUniqueId id;
  NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

std::vector<uint8_t> NcclCommunicator::unique_id_bytes(const ncclUniqueId& id) {
  const auto* p = reinterpret_cast<const uint8_t*>(id.internal);
  return std::vector<uint8_t>(p, p + NCCL_UNIQUE_ID_BYTES);
}

ncclUniqueId NcclCommunicator::unique_id_from_bytes(std::span<const uint8_t> bytes) {
  CHECK_EQ(bytes.size(), size_t{NCCL_UNIQUE_ID_BYTES});
  ncclUniqueId id;
  std::memcpy(id.internal, bytes.data(), NCCL_UNIQUE_ID_BYTES);
  return id;
}

NcclCommunicator::NcclCommunicator(int rank, int world_size, const ncclUniqueId& id,
                                   cudaStream_t stream, StopPredicate stop, WatchdogPolicy policy)
    : rank_(rank),
      world_size_(checked_world_size(rank, world_size)),
      stream_(stream),
      scratch_(64 + 64 * static_cast<size_t>(world_size), Device::kCuda),
      host_value_(allocate_pinned_int64(), &free_pinned),
      watchdog_(rank, CollectiveProbe{[this] { return async_error(); }, [this] { abort_comm(); }},
                std::move(stop), policy) {
  const auto t0 = std::chrono::steady_clock::now();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // joining returns at once; the watchdog polls until every rank joined
  NCCL_COMPLETE(watchdog_, ncclCommInitRankConfig(&comm_, world_size, id, rank, &config));
  int device = -1, version = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  NCCL_CHECK(ncclGetVersion(&version));
  spdlog::info("rank {}: NCCL {} communicator of {} ranks on GPU {} ready after {:.2f} s", rank,
               version, world_size, device,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;  // aborted
  try {
    // Finalising flushes this rank's outstanding NCCL work; bounded, so a peer that is gone
    // costs at most the timeout before the abort below.
    CollectiveWatchdog finalize(
        rank_, CollectiveProbe{[this] { return async_error(); }, [this] { abort_comm(); }}, {},
        WatchdogPolicy{.timeout = std::chrono::milliseconds(10000)});
    NCCL_COMPLETE(finalize, ncclCommFinalize(comm_));
    NCCL_CHECK(ncclCommDestroy(comm_));  // local once finalised
    comm_ = nullptr;
  } catch (const std::exception& e) {
    spdlog::warn("rank {}: NCCL communicator not finalised cleanly, aborting it: {}", rank_,
                 e.what());
    abort_comm();
  }
}

ncclResult_t NcclCommunicator::state() const {
  if (comm_ == nullptr) return ncclInvalidUsage;
  ncclResult_t s = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm_, &s);
  return r != ncclSuccess ? r : s;
}

std::string NcclCommunicator::async_error() const {
  const ncclResult_t s = state();
  if (s == ncclSuccess || s == ncclInProgress) return "";
  return std::string("NCCL reports ") + ncclGetErrorString(s) + " (" + ncclGetLastError(comm_) +
         ")";
}

void NcclCommunicator::abort_comm() noexcept {
  if (comm_ == nullptr) return;
  const ncclResult_t r = ncclCommAbort(comm_);
  comm_ = nullptr;
  if (r != ncclSuccess && r != ncclInProgress)
    spdlog::warn("rank {}: ncclCommAbort: {}", rank_, ncclGetErrorString(r));
}

void NcclCommunicator::abort() {
  watchdog_.abort();
}

void NcclCommunicator::complete(CollectiveWatchdog& dog, ncclResult_t result, const char* call,
                                const char* file, int line) {
  if (result == ncclSuccess) return;
  if (result == ncclInProgress) {
    // No other NCCL call on this communicator until it is back to ncclSuccess (an error
    // state is reported by the watchdog's probe on its next poll).
    dog.wait_until([this] { return state() == ncclSuccess; }, call);
    return;
  }
  const std::string text = std::string(call) + " failed: " + ncclGetErrorString(result) + " (" +
                           ncclGetLastError(comm_) + ")";
  dog.abort();
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) check_fail(file, line, text);
  throw CollectiveError("rank " + std::to_string(rank_) + ": " + text);
}

void NcclCommunicator::check_usable(const char* what) const {
  if (comm_ == nullptr)
    throw CollectiveError("rank " + std::to_string(rank_) + ": " + what +
                          " on an aborted NCCL communicator");
}

void NcclCommunicator::all_reduce_sum(const TensorView& inout, const ExecContext& ctx) {
  check_usable("all_reduce_sum");
  check_device_tensor(inout, "all_reduce_sum");
  const ncclDataType_t type = nccl_float_type(inout.dtype);
  const size_t count = static_cast<size_t>(inout.numel());
  if (count == 0) return;
  NCCL_COMPLETE(watchdog_,
                ncclAllReduce(inout.data, inout.data, count, type, ncclSum, comm_, ctx.stream));
}

// Point-to-point rather than ncclGather (NCCL >= 2.28 only) or ncclAllGather (every rank
// would receive, and need scratch for, world_size times the data it never reads): rank 0
// receives each peer's part straight into recv[r], the peers each send once.
void NcclCommunicator::gather_to_root(const TensorView& send, const TensorView& recv,
                                      const ExecContext& ctx) {
  check_usable("gather_to_root");
  check_device_tensor(send, "gather_to_root");
  const size_t bytes = send.nbytes();
  if (rank_ == 0) {
    check_device_tensor(recv, "gather_to_root");
    CHECK_MSG(recv.dtype == send.dtype && recv.nbytes() == bytes * static_cast<size_t>(world_size_),
              "gather_to_root: recv " << recv.shape_str() << " for send " << send.shape_str()
                                      << " on " << world_size_ << " ranks");
    if (bytes > 0)
      CUDA_CHECK(
          cudaMemcpyAsync(recv.data, send.data, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
  }
  if (world_size_ == 1 || bytes == 0) return;
  NCCL_CHECK(ncclGroupStart());  // group calls only queue: errors come from ncclGroupEnd
  if (rank_ == 0) {
    for (int r = 1; r < world_size_; ++r)
      NCCL_CHECK(ncclRecv(static_cast<uint8_t*>(recv.data) + static_cast<size_t>(r) * bytes, bytes,
                          ncclUint8, r, comm_, ctx.stream));
  } else {
    NCCL_CHECK(ncclSend(send.data, bytes, ncclUint8, 0, comm_, ctx.stream));
  }
  NCCL_COMPLETE(watchdog_, ncclGroupEnd());
}

int64_t NcclCommunicator::all_reduce_min(int64_t value, const ExecContext& ctx) {
  check_usable("all_reduce_min");
  *host_value_ = value;  // pinned: the copies below are truly asynchronous, the wait is ours
  CUDA_CHECK(cudaMemcpyAsync(scratch_.data(), host_value_.get(), sizeof(int64_t),
                             cudaMemcpyHostToDevice, ctx.stream));
  NCCL_COMPLETE(watchdog_, ncclAllReduce(scratch_.data(), scratch_.data(), 1, ncclInt64, ncclMin,
                                         comm_, ctx.stream));
  CUDA_CHECK(cudaMemcpyAsync(host_value_.get(), scratch_.data(), sizeof(int64_t),
                             cudaMemcpyDeviceToHost, ctx.stream));
  watchdog_.wait_stream(ctx.stream, "all_reduce_min");
  return *host_value_;
}

std::vector<uint8_t> NcclCommunicator::all_gather_bytes(std::span<const uint8_t> mine) {
  check_usable("all_gather_bytes");
  const size_t n = mine.size();
  std::vector<uint8_t> all(n * static_cast<size_t>(world_size_));
  if (n == 0) return all;
  DeviceBuffer device(all.size(), Device::kCuda);  // [world_size, n]
  auto* base = static_cast<uint8_t*>(device.data());
  CUDA_CHECK(cudaMemcpyAsync(base + n * static_cast<size_t>(rank_), mine.data(), n,
                             cudaMemcpyHostToDevice, stream_));
  NCCL_COMPLETE(watchdog_, ncclAllGather(base + n * static_cast<size_t>(rank_), base, n, ncclUint8,
                                         comm_, stream_));
  CUDA_CHECK(cudaMemcpyAsync(all.data(), base, all.size(), cudaMemcpyDeviceToHost, stream_));
  watchdog_.wait_stream(stream_, "all_gather_bytes");
  return all;
}

void NcclCommunicator::warm_up() {
  ExecContext ctx;
  ctx.stream = stream_;
  auto* base = static_cast<uint8_t*>(scratch_.data());
  CUDA_CHECK(cudaMemsetAsync(base, 0, scratch_.nbytes(), stream_));
  const TensorView part(base, DType::kF32, {1, 2}, Device::kCuda);  // bytes [0, 8)
  all_reduce_sum(part, ctx);
  const TensorView parts(base + 64, DType::kF32, {world_size_, 1, 2}, Device::kCuda);
  gather_to_root(part, parts, ctx);
  watchdog_.wait_stream(stream_, "NCCL warm-up");
}

void NcclCommunicator::synchronize(cudaStream_t stream) {
  watchdog_.wait_stream(stream, "waiting for the rank's stream");
}

}  // namespace nanovllm
