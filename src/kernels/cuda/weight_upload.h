// Loading weights onto the device: the host packs each weight (linear_pack.h) or copies each tensor
// straight into one of two pinned staging buffers, and a copy stream of the loader's own moves the
// buffer's bytes into the weight arena while the host fills the other buffer. The host keeps no
// second copy of a weight: the pieces live in the staging buffers only until their copy is done, and
// the caller releases the checkpoint's pages of a weight as soon as it is staged.
//
// The loop itself (which piece goes where, when to wait, the progress) is StagingLoader
// (staging_loader.h), host code driven here by the CUDA copy engine below.
//
//   buffers   kBuffers pinned buffers of kBufferBytes (64 MiB), allocated at the first weight and
//             freed by finish(); staging_plan.h decides which bytes go where. Weights larger than a
//             buffer are packed and copied in pieces of whole column tiles (or scale units, or bytes
//             for a plain tensor); a single column tile larger than a buffer (no real shape has one)
//             makes the buffers grow to hold it.
//   reuse     leaving a buffer records its event on the copy stream; entering a buffer waits on the
//             host for its event (its earlier copies are done) before the packer writes to it.
//   ordering  the compute stream must not read a weight before its copy is done: fence() makes it
//             wait (cudaStreamWaitEvent, no host wait) for every copy staged so far. The backend calls
//             it before every op and every transfer on the compute stream; it costs nothing when no
//             weight was staged since the last fence.
//   finish    (weights_summary(): the end of loading) fences, waits for the copy stream, frees the
//             pinned buffers and stops the clock. Weights prepared later start a new stretch.
//   progress  load_progress.h: a log line (spdlog info) at most once a second with GB done and GB/s,
//             and the summary weights_summary() shows.
//
// Tested on the CPU (tests/unit/kernels/cuda_weight_upload_test.cpp): the planner, the range packers,
// the progress meter, and StagingLoader's loop against a simulated copy engine whose copies read the
// staging buffers as late as the events allow. Compiled-only (no GPU on the build machine): the CUDA
// calls of CudaStagingTarget and the fence. The first GPU session must:
//   - run ctest -L gpu: backend_ops_cuda_tests as is (LinearsEveryFormat, Moe, the model-shape cases
//     prepare weights between ops, so they exercise the fence) and cuda.BackendOps.small_staging_buffers
//     (the same cases with 32 KiB buffers: many pieces per weight, buffer reuse, one growth, and
//     FP4SERVE_CUDA_SYNC=1);
//   - load something larger than the two buffers (cuda_ops_bench's lm_head and MoE layers, or
//     `fp4serve bench model` on a synth checkpoint) and check its results against the CPU as above;
//   - read the load figure in the weights_summary line ("uploaded X GB in Y s (Z GB/s)") next to
//     the host-to-device bandwidth of the machine (the packing on the host may be the limit).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/cuda/staging_loader.h"

namespace fp4serve::kernels::cuda {

// StagingTarget on CUDA: pinned buffers (cudaHostAlloc), a non-blocking copy stream of its own and
// one event per buffer, all created at first use.
class CudaStagingTarget final : public StagingTarget {
 public:
  explicit CudaStagingTarget(int buffers) : buffers_(buffers) {}
  ~CudaStagingTarget() override;
  CudaStagingTarget(const CudaStagingTarget&) = delete;
  CudaStagingTarget& operator=(const CudaStagingTarget&) = delete;

  char* allocate(std::size_t bytes) override;
  void release(char* buffer) override;
  void copy(void* device_dst, const char* staged, std::size_t bytes) override;
  void record(int buffer) override;
  void wait(int buffer) override;
  void drain() override;
  // `compute` waits on the device for every copy enqueued so far.
  void fence(cudaStream_t compute);

 private:
  void ensure_stream();
  int buffers_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t fence_event_ = nullptr;
  std::vector<cudaEvent_t> done_;
};

class WeightUploader {
 public:
  static constexpr std::size_t kBufferBytes = std::size_t{64} << 20;
  static constexpr int kBuffers = 2;
  using Fill = StagingLoader::Fill;

  explicit WeightUploader(std::size_t buffer_bytes = kBufferBytes, int buffers = kBuffers)
      : target_(buffers), loader_(target_, buffer_bytes, buffers) {}

  // Stages an array of `rows` rows of `row_bytes` (fill writes them) and enqueues its copy to
  // `device_dst` on the copy stream. Returns once every row is staged: the array's sources may then
  // be released. `what` names it in errors and logs.
  void upload(void* device_dst, int64_t rows, std::size_t row_bytes, const Fill& fill, std::string_view what) {
    loader_.upload(device_dst, rows, row_bytes, fill, what);
  }
  // A plain host array of `bytes`, copied as is.
  void upload_bytes(void* device_dst, const void* host, std::size_t bytes, std::string_view what) {
    loader_.upload_bytes(device_dst, host, bytes, what);
  }
  // `compute` waits (on the device) for every copy staged so far; nothing when none was since the
  // last fence.
  void fence(cudaStream_t compute) {
    if (loader_.take_unfenced()) target_.fence(compute);
  }
  // The end of loading: fence(compute), wait for the copies, free the pinned buffers, stop the clock.
  void finish(cudaStream_t compute) {
    fence(compute);
    loader_.finish();
  }

  LoadProgress& progress() { return loader_.progress(); }
  const LoadProgress& progress() const { return loader_.progress(); }

 private:
  CudaStagingTarget target_;  // before loader_: the loader drains it when destroyed
  StagingLoader loader_;
};

}  // namespace fp4serve::kernels::cuda
