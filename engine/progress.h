// Progress of a run on stderr: a live one-line bar when stderr is a terminal, otherwise a
// spdlog info line every few seconds (logs stay readable in files), and a final summary.
// The clock and both outputs are injectable so tests drive it with a fake clock.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace nanovllm {

struct ProgressOptions {
  bool live = false;               // redraw one line in place (stderr is a terminal)
  double log_interval_s = 5.0;     // not live: one log line this often
  double redraw_interval_s = 0.1;  // live: at most this often
  int bar_width = 24;              // live: characters of the bar itself
  std::function<double()> clock;   // seconds, monotonic; empty = std::chrono::steady_clock
  std::function<void(std::string_view)> write_live;  // empty = stderr
  std::function<void(const std::string&)> log;       // empty = spdlog::info
};

bool stderr_is_terminal();

// "0:07", "12:34", "1:02:03"
std::string format_duration(double seconds);

class Progress {
 public:
  // Starts the clock. `total_requests` counts every request that will get a result line.
  explicit Progress(int64_t total_requests, ProgressOptions options = {});

  // The engine's running totals (EngineStats), so callers keep no "seen so far" copies.
  void set_tokens(int64_t prefill_total, int64_t decode_total) {
    prefill_tokens_ = prefill_total;
    decode_tokens_ = decode_total;
  }
  void request_finished(bool ok) { (ok ? num_ok_ : num_failed_) += 1; }

  // Redraws the bar or logs a line when one is due; call after every engine step.
  void update();
  // Clears the bar and logs the summary.
  void finish();

  // "12/100 requests | prefill 1234 tok/s | decode 567 tok/s | 0:12 elapsed | ETA 1:30"
  std::string status_line() const;
  // "[#####-------------------] " followed by status_line()
  std::string bar_line() const;
  // "requests: 98 ok, 2 failed | tokens: 12345 prefill, 6789 decode | elapsed 0:12 (12.3 s)
  //  | throughput: 1003 prefill tok/s, 551 decode tok/s, 8.0 req/s"
  std::string summary() const;

  int64_t num_done() const { return num_ok_ + num_failed_; }

 private:
  double now() const;
  double elapsed() const { return now() - start_; }

  int64_t total_;
  ProgressOptions options_;
  double start_;
  double last_output_;  // when the bar was drawn / a line logged
  int64_t num_ok_ = 0;
  int64_t num_failed_ = 0;
  int64_t prefill_tokens_ = 0;
  int64_t decode_tokens_ = 0;
  bool drawn_ = false;  // a live bar is on screen
};

}  // namespace nanovllm
