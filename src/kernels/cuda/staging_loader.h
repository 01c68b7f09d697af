// The weight loader's host loop (weight_upload.h), apart from CUDA so that a CPU test can drive it
// against a simulated copy engine: it asks the planner (staging_plan.h) where each piece goes, makes
// the buffer it enters safe to write (waits for the buffer's earlier copies), has the piece filled
// (packed or copied) in place, enqueues its copy, and counts the bytes (load_progress.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "kernels/cuda/load_progress.h"
#include "kernels/cuda/staging_plan.h"

namespace fp4serve::kernels::cuda {

// The copy engine the loop drives: the CUDA copy stream and per-buffer events (weight_upload.cpp),
// or a CPU test's simulation. Copies are asynchronous: a copy reads its staged bytes at some time
// before the next record/wait pair or drain that covers it completes.
class StagingTarget {
 public:
  virtual ~StagingTarget() = default;
  virtual char* allocate(std::size_t bytes) = 0;  // a (pinned) staging buffer
  virtual void release(char* buffer) = 0;         // called only after drain()
  virtual void copy(void* device_dst, const char* staged, std::size_t bytes) = 0;  // enqueue
  virtual void record(int buffer) = 0;  // buffer's event: after every copy enqueued so far
  virtual void wait(int buffer) = 0;    // the host waits for buffer's last recorded event
  virtual void drain() = 0;             // the host waits for every copy enqueued
};

class StagingLoader {
 public:
  // Writes rows [row0, row1) of an array to `dst` (host memory of (row1 - row0) * row_bytes bytes).
  using Fill = std::function<void(int64_t row0, int64_t row1, void* dst)>;

  StagingLoader(StagingTarget& target, std::size_t buffer_bytes, int buffers, LoadProgress progress = LoadProgress());
  ~StagingLoader();  // drains and releases the buffers (errors ignored)
  StagingLoader(const StagingLoader&) = delete;
  StagingLoader& operator=(const StagingLoader&) = delete;

  // Stages `rows` rows of `row_bytes` (fill writes them, a piece at a time, in the staging buffers)
  // and enqueues their copy to `device_dst`. Returns once every row is staged.
  void upload(void* device_dst, int64_t rows, std::size_t row_bytes, const Fill& fill, std::string_view what);
  void upload_bytes(void* device_dst, const void* host, std::size_t bytes, std::string_view what);
  // Waits for every copy, releases the buffers (the next upload allocates them again), stops the clock.
  void finish();
  // True once after copies were enqueued (the caller then fences its compute stream).
  bool take_unfenced() {
    const bool u = unfenced_;
    unfenced_ = false;
    return u;
  }

  LoadProgress& progress() { return progress_; }
  const LoadProgress& progress() const { return progress_; }
  const StagingPlanner& planner() const { return planner_; }

 private:
  void allocate_buffers();
  void release_buffers();

  StagingTarget& target_;
  StagingPlanner planner_;
  LoadProgress progress_;
  std::vector<char*> buffers_;  // empty while released
  std::vector<bool> busy_;      // per buffer: an event recorded when it was left, not waited for yet
  bool unfenced_ = false;
};

}  // namespace fp4serve::kernels::cuda
