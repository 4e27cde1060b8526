// One place for failure checks. CHECK* are for our own invariants (a broken one is a bug);
// user input is validated where it is read and reported with its file/line/field instead.
// Every failure throws nanovllm::CheckError whose message carries file:line and, once
// set_check_rank() was called in a worker, the rank.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace nanovllm {

struct CheckError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// -1 until a rank process sets it; printed in every failure message.
inline int& check_rank_slot() {
  static int rank = -1;
  return rank;
}
inline void set_check_rank(int rank) {
  check_rank_slot() = rank;
}

[[noreturn]] inline void check_fail(const char* file, int line, const std::string& what) {
  std::ostringstream os;
  if (check_rank_slot() >= 0) os << "[rank " << check_rank_slot() << "] ";
  os << file << ":" << line << ": " << what;
  throw CheckError(os.str());
}

template <typename A, typename B>
[[noreturn]] void check_op_fail(const char* file, int line, const char* expr, const A& a,
                                const B& b) {
  std::ostringstream os;
  os << "CHECK(" << expr << ") failed: " << a << " vs " << b;
  check_fail(file, line, os.str());
}

}  // namespace nanovllm

#define NANOVLLM_CHECK_OP(op, a, b)                                                   \
  do {                                                                                \
    const auto& nv_a_ = (a);                                                          \
    const auto& nv_b_ = (b);                                                          \
    if (!(nv_a_ op nv_b_))                                                            \
      ::nanovllm::check_op_fail(__FILE__, __LINE__, #a " " #op " " #b, nv_a_, nv_b_); \
  } while (0)

#define CHECK(cond)                                                                     \
  do {                                                                                  \
    if (!(cond)) ::nanovllm::check_fail(__FILE__, __LINE__, "CHECK(" #cond ") failed"); \
  } while (0)
#define CHECK_MSG(cond, msg)                                    \
  do {                                                          \
    if (!(cond)) {                                              \
      std::ostringstream nv_os_;                                \
      nv_os_ << "CHECK(" #cond ") failed: " << msg;             \
      ::nanovllm::check_fail(__FILE__, __LINE__, nv_os_.str()); \
    }                                                           \
  } while (0)
#define CHECK_EQ(a, b) NANOVLLM_CHECK_OP(==, a, b)
#define CHECK_NE(a, b) NANOVLLM_CHECK_OP(!=, a, b)
#define CHECK_LT(a, b) NANOVLLM_CHECK_OP(<, a, b)
#define CHECK_LE(a, b) NANOVLLM_CHECK_OP(<=, a, b)
#define CHECK_GT(a, b) NANOVLLM_CHECK_OP(>, a, b)
#define CHECK_GE(a, b) NANOVLLM_CHECK_OP(>=, a, b)

// The library calls below expand only where their headers are included
// (<cuda_runtime_api.h>, <cublas_v2.h>, <nccl.h>), so host-only code can include this file.
#define CUDA_CHECK(call)                                                                    \
  do {                                                                                      \
    cudaError_t nv_err_ = (call);                                                           \
    if (nv_err_ != cudaSuccess)                                                             \
      ::nanovllm::check_fail(__FILE__, __LINE__,                                            \
                             std::string(#call " failed: ") + cudaGetErrorString(nv_err_)); \
  } while (0)
// After every kernel launch: catches bad launch configurations immediately.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
#define CUBLAS_CHECK(call)                                                                    \
  do {                                                                                        \
    cublasStatus_t nv_st_ = (call);                                                           \
    if (nv_st_ != CUBLAS_STATUS_SUCCESS)                                                      \
      ::nanovllm::check_fail(__FILE__, __LINE__,                                              \
                             std::string(#call " failed: ") + cublasGetStatusString(nv_st_)); \
  } while (0)
// NCCL's last error text says which peer/transport failed, which the result code does not.
// A nonblocking communicator's ncclInProgress is not a failure but must be waited out: such
// calls go through NcclCommunicator, not this macro.
#define NCCL_CHECK(call)                                                                          \
  do {                                                                                            \
    ncclResult_t nv_nr_ = (call);                                                                 \
    if (nv_nr_ != ncclSuccess)                                                                    \
      ::nanovllm::check_fail(__FILE__, __LINE__,                                                  \
                             std::string(#call " failed: ") + ncclGetErrorString(nv_nr_) + " (" + \
                                 ncclGetLastError(nullptr) + ")");                                \
  } while (0)
