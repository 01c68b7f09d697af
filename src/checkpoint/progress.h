// Progress of a long byte-counting job (loading weights, `fp4serve synth`), shown the way a user
// can read it wherever the output goes:
//   - on a terminal (stderr is a tty): one line redrawn in place, at most ~10 times a second,
//       loading weights [########------------] 1.23/3.40 GB  0.85 GB/s  ETA 3s
//   - otherwise (a log file, CI): a log line through spdlog every ~5 s or every 10 % of the total,
//     whichever comes first, so logs show that the job is alive without drowning in lines.
// finish() prints the final line (total, time, average rate) once. add() may be called from any
// thread; printing is serialized and throttled so that callers can report small amounts cheaply.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace fp4serve {

class ByteProgress {
 public:
  enum class Mode : uint8_t {
    kAuto,   // kBar when stderr is a terminal, else kLines
    kBar,    // redrawn line on stderr
    kLines,  // periodic log lines
    kOff,    // count only, print nothing
  };
  // Where the text goes instead of stderr / spdlog (tests). Bar updates start with '\r'.
  using Sink = std::function<void(std::string_view text)>;

  // enabled = false is kOff (the byte count is still kept).
  ByteProgress(std::string label, uint64_t total_bytes, bool enabled = true);
  ByteProgress(std::string label, uint64_t total_bytes, Mode mode, Sink sink = nullptr);
  // Prints the final line if finish() was not called (e.g. the job ended by an exception: the
  // terminal must not be left with a half-drawn bar).
  ~ByteProgress();
  ByteProgress(const ByteProgress&) = delete;
  ByteProgress& operator=(const ByteProgress&) = delete;

  void add(uint64_t bytes);
  // Prints the final line; later calls do nothing.
  void finish();

  uint64_t done() const { return done_.load(std::memory_order_relaxed); }
  uint64_t total() const { return total_; }
  Mode mode() const { return mode_; }
  double elapsed_seconds() const;

  // The text of one progress line (without '\r' or newline), exposed for tests:
  //   "<label> [#####-----] 1.23/3.40 GB  0.85 GB/s  ETA 3s"      (with_bar)
  //   "<label>: 1.23/3.40 GB (36%)  0.85 GB/s  ETA 3s"              (log line)
  static std::string format_line(std::string_view label, uint64_t done, uint64_t total, double seconds,
                                 bool with_bar, int bar_width = 30);
  // "3s", "1m05s", "2h03m".
  static std::string format_duration(double seconds);

 private:
  void maybe_print(uint64_t done_now);
  void emit(const std::string& text, bool is_bar);

  std::string label_;
  uint64_t total_ = 0;
  Mode mode_ = Mode::kOff;
  Sink sink_;
  std::atomic<uint64_t> done_{0};
  std::chrono::steady_clock::time_point start_;
  std::mutex print_mutex_;
  std::chrono::steady_clock::time_point last_print_;  // guarded by print_mutex_
  uint64_t last_printed_bytes_ = 0;                   // guarded by print_mutex_
  bool finished_ = false;                             // guarded by print_mutex_
};

}  // namespace fp4serve
