#include "checkpoint/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace fp4serve {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kBarInterval = std::chrono::milliseconds(100);
constexpr auto kLineInterval = std::chrono::seconds(5);
constexpr double kLineFraction = 0.10;

double gigabytes(uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

ByteProgress::Mode resolve(ByteProgress::Mode mode) {
  if (mode != ByteProgress::Mode::kAuto) return mode;
  return isatty(STDERR_FILENO) ? ByteProgress::Mode::kBar : ByteProgress::Mode::kLines;
}

}  // namespace

ByteProgress::ByteProgress(std::string label, uint64_t total_bytes, bool enabled)
    : ByteProgress(std::move(label), total_bytes, enabled ? Mode::kAuto : Mode::kOff) {}

ByteProgress::ByteProgress(std::string label, uint64_t total_bytes, Mode mode, Sink sink)
    : label_(std::move(label)), total_(total_bytes), mode_(resolve(mode)), sink_(std::move(sink)) {
  start_ = Clock::now();
  last_print_ = start_;
}

ByteProgress::~ByteProgress() {
  try {
    finish();
  } catch (...) {  // printing must never turn into a crash in a destructor
  }
}

double ByteProgress::elapsed_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void ByteProgress::add(uint64_t bytes) {
  const uint64_t now_done = done_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (mode_ == Mode::kOff) return;
  maybe_print(now_done);
}

void ByteProgress::maybe_print(uint64_t done_now) {
  // Never block a worker on printing: whoever holds the lock prints for everybody.
  std::unique_lock<std::mutex> lock(print_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || finished_) return;
  const auto now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  if (mode_ == Mode::kBar) {
    if (now - last_print_ < kBarInterval) return;
    last_print_ = now;
    last_printed_bytes_ = done_now;
    emit(format_line(label_, done_now, total_, seconds, true), true);
    return;
  }
  const auto step = static_cast<uint64_t>(kLineFraction * static_cast<double>(total_));
  const bool time_due = now - last_print_ >= kLineInterval;
  const bool share_due = step > 0 && done_now - last_printed_bytes_ >= step;
  if (!time_due && !share_due) return;
  last_print_ = now;
  last_printed_bytes_ = done_now;
  emit(format_line(label_, done_now, total_, seconds, false), false);
}

void ByteProgress::finish() {
  std::lock_guard<std::mutex> lock(print_mutex_);
  if (finished_) return;
  finished_ = true;
  if (mode_ == Mode::kOff) return;
  const uint64_t d = done();
  const double seconds = elapsed_seconds();
  if (mode_ == Mode::kBar) {
    // The full bar once more, then a newline so that later output starts on a fresh line.
    emit(format_line(label_, d, total_, seconds, true) + "\n", true);
    return;
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: %.2f GB in %.1f s (%.2f GB/s)", label_.c_str(), gigabytes(d), seconds,
                seconds > 0 ? gigabytes(d) / seconds : 0.0);
  emit(buf, false);
}

void ByteProgress::emit(const std::string& text, bool is_bar) {
  if (is_bar) {
    // \r to redraw; \x1b[K clears what a longer previous line left behind.
    const std::string line = "\r" + text + (text.ends_with('\n') ? "" : "\x1b[K");
    if (sink_) {
      sink_(line);
    } else {
      std::fputs(line.c_str(), stderr);
      std::fflush(stderr);
    }
    return;
  }
  if (sink_) {
    sink_(text + "\n");
  } else {
    spdlog::info("{}", text);
  }
}

std::string ByteProgress::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  }
  return buf;
}

std::string ByteProgress::format_line(std::string_view label, uint64_t done, uint64_t total, double seconds,
                                      bool with_bar, int bar_width) {
  const double fraction = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 1.0;
  const double rate = seconds > 0 ? gigabytes(done) / seconds : 0.0;
  // A job whose first part writes few bytes (synth computes scales before it writes the values)
  // would show absurd estimates; beyond a day the honest answer is "unknown".
  const double seconds_left = rate > 0 ? gigabytes(total - std::min(done, total)) / rate : -1.0;
  const std::string eta = done >= total                               ? std::string("0s")
                          : (seconds_left < 0 || seconds_left >= 86400.0) ? std::string("?")
                                                                          : format_duration(seconds_left);
  std::string out(label);
  char buf[128];
  if (with_bar) {
    const int filled = static_cast<int>(fraction * bar_width);
    out += " [";
    out.append(static_cast<size_t>(filled), '#');
    out.append(static_cast<size_t>(bar_width - filled), '-');
    out += "]";
    std::snprintf(buf, sizeof buf, " %.2f/%.2f GB  %.2f GB/s  ETA %s", gigabytes(done), gigabytes(total), rate,
                  eta.c_str());
  } else {
    std::snprintf(buf, sizeof buf, ": %.2f/%.2f GB (%d%%)  %.2f GB/s  ETA %s", gigabytes(done), gigabytes(total),
                  static_cast<int>(fraction * 100.0), rate, eta.c_str());
  }
  return out + buf;
}

}  // namespace fp4serve
