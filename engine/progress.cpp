#include "engine/progress.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace nanovllm {
namespace {

double rate(int64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
}

}  // namespace

bool stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

Progress::Progress(int64_t total_requests, ProgressOptions options)
    : total_(total_requests), options_(std::move(options)) {
  start_ = now();
  last_output_ = start_;
}

double Progress::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Progress::status_line() const {
  const double t = elapsed();
  const int64_t done = num_done();
  // Requests finish at a roughly steady rate once batching settles: extrapolate it.
  std::string eta = "?";
  if (done >= total_) {
    eta = format_duration(0);
  } else if (done > 0) {
    eta = format_duration(t / static_cast<double>(done) * static_cast<double>(total_ - done));
  }
  std::string line = fmt::format("{}/{} requests", done, total_);
  if (num_failed_ > 0) line += fmt::format(" ({} failed)", num_failed_);
  line += fmt::format(" | prefill {:.0f} tok/s | decode {:.0f} tok/s | {} elapsed | ETA {}",
                      rate(prefill_tokens_, t), rate(decode_tokens_, t), format_duration(t), eta);
  return line;
}

std::string Progress::bar_line() const {
  const int width = std::max(1, options_.bar_width);
  const double fraction =
      total_ > 0 ? std::min(1.0, static_cast<double>(num_done()) / static_cast<double>(total_))
                 : 1.0;
  const int filled = static_cast<int>(fraction * width);
  // fmt rather than operator+ chains: GCC 12 -O3 raises a false -Wrestrict on those.
  return fmt::format("[{}{}] {}", std::string(filled, '#'), std::string(width - filled, '-'),
                     status_line());
}

std::string Progress::summary() const {
  const double t = elapsed();
  return fmt::format(
      "requests: {} ok, {} failed | tokens: {} prefill, {} decode | elapsed {} ({:.1f} s) | "
      "throughput: {:.0f} prefill tok/s, {:.0f} decode tok/s, {:.1f} req/s",
      num_ok_, num_failed_, prefill_tokens_, decode_tokens_, format_duration(t), t,
      rate(prefill_tokens_, t), rate(decode_tokens_, t), rate(num_done(), t));
}

void Progress::update() {
  const double t = now();
  const double interval = options_.live ? options_.redraw_interval_s : options_.log_interval_s;
  if (t - last_output_ < interval) return;
  last_output_ = t;
  if (options_.live) {
    // Carriage return, the line, then erase whatever a longer previous line left.
    const std::string text = fmt::format("\r{}\x1b[K", bar_line());
    if (options_.write_live) {
      options_.write_live(text);
    } else {
      std::fputs(text.c_str(), stderr);
      std::fflush(stderr);
    }
    drawn_ = true;
  } else {
    const std::string text = fmt::format("progress: {}", status_line());
    if (options_.log) {
      options_.log(text);
    } else {
      spdlog::info("{}", text);
    }
  }
}

void Progress::finish() {
  if (drawn_) {
    const std::string clear = "\r\x1b[K";
    if (options_.write_live) {
      options_.write_live(clear);
    } else {
      std::fputs(clear.c_str(), stderr);
      std::fflush(stderr);
    }
    drawn_ = false;
  }
  const std::string text = fmt::format("done: {}", summary());
  if (options_.log) {
    options_.log(text);
  } else {
    spdlog::info("{}", text);
  }
}

}  // namespace nanovllm
