// Helpers for the model tests: an in-process tensor-parallel group (ranks are threads that
// meet at a barrier and sum each other's buffers), and a random-weight model folder written
// once per test binary.
#pragma once

#include <algorithm>
#include <barrier>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/communicator.h"
#include "layers/model_presets.h"
#include "layers/model_writer.h"

namespace nanovllm::test {

// The shared state of one group of ThreadCommunicators.
struct ThreadGroup {
  explicit ThreadGroup(int n) : size(n), barrier(n), posted(n), values(n) {}
  int size;
  std::barrier<> barrier;
  std::vector<TensorView> posted;  // each rank's buffer for the collective in progress
  std::vector<int64_t> values;     // each rank's value for all_reduce_min
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_.size; }

  // Sums in rank order in f32 and rounds once, like a reduction of bf16 partial sums.
  void all_reduce_sum(const TensorView& inout, const ExecContext&) override {
    CHECK(inout.is_contiguous() && inout.on_cpu());
    group_.posted[rank_] = inout;
    group_.barrier.arrive_and_wait();
    const int64_t n = inout.numel();
    std::vector<float> sum(static_cast<size_t>(n), 0.0f);  // [numel] f32
    for (const TensorView& t : group_.posted)
      for (int64_t i = 0; i < n; ++i)
        sum[i] += t.dtype == DType::kBf16 ? bf16_to_float(t.ptr<uint16_t>()[i]) : t.ptr<float>()[i];
    group_.barrier.arrive_and_wait();  // everyone has read before anyone writes
    for (int64_t i = 0; i < n; ++i) {
      if (inout.dtype == DType::kBf16)
        inout.ptr<uint16_t>()[i] = float_to_bf16(sum[i]);
      else
        inout.ptr<float>()[i] = sum[i];
    }
    group_.barrier.arrive_and_wait();
  }

  void gather_to_root(const TensorView& send, const TensorView& recv, const ExecContext&) override {
    group_.posted[rank_] = send;
    group_.barrier.arrive_and_wait();
    if (rank_ == 0)
      for (int r = 0; r < group_.size; ++r)
        std::memcpy(static_cast<char*>(recv.data) + r * send.nbytes(), group_.posted[r].data,
                    send.nbytes());
    group_.barrier.arrive_and_wait();
  }

  int64_t all_reduce_min(int64_t value, const ExecContext&) override {
    group_.values[rank_] = value;
    group_.barrier.arrive_and_wait();
    const int64_t min = *std::min_element(group_.values.begin(), group_.values.end());
    group_.barrier.arrive_and_wait();  // everyone has read before the next call writes
    return min;
  }

 private:
  ThreadGroup& group_;
  int rank_;
};

// Runs fn(rank, comm) on tp threads and joins them; rethrows the first exception.
inline void run_ranks(int tp, const std::function<void(int, Communicator&)>& fn) {
  ThreadGroup group(tp);
  std::vector<std::exception_ptr> errors(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r)
    threads.emplace_back([&, r] {
      ThreadCommunicator comm(group, r);
      try {
        fn(r, comm);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// A model folder under the temp dir, removed when the object dies.
class TempModel {
 public:
  TempModel(const std::string& preset, uint64_t seed = 7) {
    std::random_device rd;
    dir_ = std::filesystem::temp_directory_path() /
           ("nanovllm_model_test_" + preset + "_" + std::to_string(rd()));
    config_ = model_preset(preset);
    ModelWriterOptions options;
    options.preset = preset;
    options.seed = seed;
    write_model_folder(config_, dir_, options);
  }
  ~TempModel() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
};

}  // namespace nanovllm::test
