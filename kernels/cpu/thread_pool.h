// A persistent pool of worker threads for the CPU kernels. Starting std::threads on every
// linear call cost more than the small matmuls themselves; these workers sleep on a
// condition variable between jobs. One job at a time: a caller that finds the pool busy
// (another rank thread in an in-process TP test, or a nested call) runs the job's parts
// itself, one after another, so results never depend on who ran which part.
#pragma once

#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nanovllm::kernels::cpu {

class ThreadPool {
 public:
  ThreadPool() = default;
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  // Calls part(i) for i in [0, parts): part 0 on the caller, the others on pool workers
  // (started on first need, kept for later calls). Rethrows the first exception of a part.
  void run(int parts, const std::function<void(int)>& part) {
    if (parts <= 1) {
      if (parts == 1) part(0);
      return;
    }
    std::unique_lock busy(busy_, std::try_to_lock);
    // A forked child inherits the pool but not its threads: it runs the parts itself.
    if (!busy.owns_lock() || getpid() != owner_pid_) {
      for (int i = 0; i < parts; ++i) part(i);
      return;
    }
    {
      std::lock_guard lock(mu_);
      while (static_cast<int>(workers_.size()) < parts - 1) {
        const int index = static_cast<int>(workers_.size()) + 1;
        workers_.emplace_back([this, index] { worker_loop(index); });
      }
      job_ = &part;
      job_parts_ = parts;
      pending_ = parts - 1;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    std::exception_ptr mine;
    try {
      part(0);
    } catch (...) {
      mine = std::current_exception();
    }
    std::unique_lock lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Worker `index` (1-based: part 0 is the caller's) runs part `index` of every job that has
  // that many parts.
  void worker_loop(int index) {
    uint64_t seen = 0;
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= job_parts_) continue;
      const std::function<void(int)>* job = job_;
      lock.unlock();
      std::exception_ptr err;
      try {
        (*job)(index);
      } catch (...) {
        err = std::current_exception();
      }
      lock.lock();
      if (err && !error_) error_ = err;
      if (--pending_ == 0) done_.notify_one();
    }
  }

  const pid_t owner_pid_ = getpid();
  std::mutex busy_;  // held by the caller of the job in flight
  std::mutex mu_;    // guards everything below
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  int job_parts_ = 0;
  int pending_ = 0;  // parts still running on workers
  uint64_t generation_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
};

// The process-wide pool (created on first use, joined at exit).
inline ThreadPool& cpu_thread_pool() {
  static ThreadPool pool;
  return pool;
}

}  // namespace nanovllm::kernels::cpu
