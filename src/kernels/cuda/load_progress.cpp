#include "kernels/cuda/load_progress.h"

#include <fmt/format.h>

#include <chrono>

namespace fp4serve::kernels::cuda {
namespace {

std::string gb(std::size_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / 1e9); }

}  // namespace

LoadProgress::LoadProgress(Clock clock, double interval_s, std::string what)
    : clock_(std::move(clock)), interval_(interval_s), what_(std::move(what)) {}

double LoadProgress::steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void LoadProgress::start() {
  if (loading_) return;
  loading_ = true;
  stretch_start_ = clock_();
  last_line_ = stretch_start_;
}

std::optional<std::string> LoadProgress::add(std::size_t bytes) {
  start();
  bytes_ += bytes;
  const double now = clock_();
  if (now - last_line_ < interval_) return std::nullopt;
  last_line_ = now;
  return line();
}

void LoadProgress::stop() {
  if (!loading_) return;
  done_seconds_ += clock_() - stretch_start_;
  loading_ = false;
}

double LoadProgress::seconds() const { return done_seconds_ + (loading_ ? clock_() - stretch_start_ : 0.0); }

double LoadProgress::gb_per_s() const {
  const double s = seconds();
  return s > 0 ? static_cast<double>(bytes_) / 1e9 / s : 0.0;
}

std::string LoadProgress::line() const {
  const std::string done = total_ ? gb(bytes_) + " / " + gb(total_) : gb(bytes_);
  return fmt::format("loading weights to {}: {} GB, {:.1f} GB/s", what_, done, gb_per_s());
}

std::string LoadProgress::summary() const {
  return fmt::format("uploaded {} GB in {:.1f} s ({:.1f} GB/s)", gb(bytes_), seconds(), gb_per_s());
}

}  // namespace fp4serve::kernels::cuda
