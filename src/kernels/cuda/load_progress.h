// The weight loader's progress (weight_upload.h): bytes uploaded, the time spent loading, a progress
// line at most once per interval ("loading weights to cuda: 12.3 / 22.1 GB, 9.8 GB/s") and the final
// summary ("uploaded 22.1 GB in 4.3 s (5.1 GB/s)"). The clock is injected, so that the CPU tests
// drive it (tests/unit/kernels/cuda_weight_upload_test.cpp). GB are 10^9 bytes.
//
// Time counts only while loading: from start() (the first weight of a stretch) to stop() (the end of
// loading, when the copies are done). Weights prepared later (a test that interleaves preparing and
// running) start a new stretch; the idle time between stretches is not counted.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace fp4serve::kernels::cuda {

class LoadProgress {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  explicit LoadProgress(Clock clock = steady_seconds, double interval_s = 1.0, std::string what = "cuda");

  // The bytes the whole load is expected to upload (0: unknown); lines then show "done / total".
  void expect_total(std::size_t bytes) { total_ = bytes; }
  // Starts a loading stretch; nothing while one runs.
  void start();
  // Counts `bytes` uploaded (starting a stretch if none runs); the progress line when one is due:
  // at least `interval_s` after the stretch started or after the last line.
  std::optional<std::string> add(std::size_t bytes);
  // Ends the stretch: its time counts in seconds().
  void stop();

  bool loading() const { return loading_; }
  std::size_t bytes() const { return bytes_; }
  double seconds() const;  // loading time, the running stretch included
  double gb_per_s() const;  // bytes() / seconds(), 0 before any time passed
  std::string line() const;  // the progress line for the current figures
  std::string summary() const;

  static double steady_seconds();

 private:
  Clock clock_;
  double interval_;
  std::string what_;
  std::size_t total_ = 0, bytes_ = 0;
  bool loading_ = false;
  double stretch_start_ = 0, done_seconds_ = 0, last_line_ = 0;
};

}  // namespace fp4serve::kernels::cuda
