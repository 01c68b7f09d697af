#include "kernels/cuda/weight_upload.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

WeightUploader::WeightUploader(std::size_t buffer_bytes, int buffers) : planner_(buffer_bytes, buffers) {}

WeightUploader::~WeightUploader() {
  // Copies still reading a staging buffer finish before it is freed (and before the arena they
  // write to goes: the context declares the arena first, so it is destroyed after this).
  if (copy_) cudaStreamSynchronize(copy_);
  free_buffers();
  for (cudaEvent_t e : done_)
    if (e) cudaEventDestroy(e);
  if (fence_event_) cudaEventDestroy(fence_event_);
  if (copy_) cudaStreamDestroy(copy_);
}

void WeightUploader::ensure_ready() {
  if (!copy_) {
    check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "weight upload", "copy stream");
    check(cudaEventCreateWithFlags(&fence_event_, cudaEventDisableTiming), "weight upload", "event");
    done_.assign(static_cast<std::size_t>(planner_.buffers()), nullptr);
    for (cudaEvent_t& e : done_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "weight upload", "event");
  }
  if (buffers_.empty()) allocate_buffers();
}

void WeightUploader::allocate_buffers() {
  busy_.assign(static_cast<std::size_t>(planner_.buffers()), false);
  for (int i = 0; i < planner_.buffers(); ++i) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, planner_.buffer_bytes(), cudaHostAllocDefault), "weight upload",
          "pinned staging buffer of " + std::to_string(planner_.buffer_bytes()) + " bytes");
    buffers_.push_back(static_cast<char*>(p));
  }
}

// Only with the copy stream drained (no copy reads a buffer).
void WeightUploader::free_buffers() {
  for (char* p : buffers_) cudaFreeHost(p);
  buffers_.clear();
  busy_.assign(busy_.size(), false);
}

void WeightUploader::upload(void* device_dst, int64_t rows, std::size_t row_bytes, const Fill& fill,
                            std::string_view what) {
  if (rows <= 0 || row_bytes == 0) return;
  ensure_ready();
  progress_.start();
  char* out = static_cast<char*>(device_dst);
  for (const StagingPiece& p : planner_.place(rows, row_bytes)) {
    if (p.grows) {
      check(cudaStreamSynchronize(copy_), "weight upload", what, "before growing the staging buffers");
      free_buffers();
      allocate_buffers();
      spdlog::info("weight upload: a row of {} bytes of {} outgrows the staging buffers; they grow to {} bytes",
                   row_bytes, what, planner_.buffer_bytes());
    }
    if (p.enters_buffer) {
      // The buffer left stays busy until the copy stream passes its last copy; the one entered
      // may still be read by its earlier copies.
      const auto left = static_cast<std::size_t>(p.left_buffer), entered = static_cast<std::size_t>(p.buffer);
      check(cudaEventRecord(done_[left], copy_), "weight upload", what, "record");
      busy_[left] = true;
      if (busy_[entered]) {
        check(cudaEventSynchronize(done_[entered]), "weight upload", what, "staging buffer reuse");
        busy_[entered] = false;
      }
    }
    char* staged = buffers_[static_cast<std::size_t>(p.buffer)] + p.offset;
    fill(p.row0, p.row1, staged);
    check(cudaMemcpyAsync(out + static_cast<std::size_t>(p.row0) * row_bytes, staged, p.bytes, cudaMemcpyHostToDevice, copy_),
          "weight upload", what);
    unfenced_ = true;
    if (auto line = progress_.add(p.bytes)) spdlog::info("{}", *line);
  }
}

void WeightUploader::upload_bytes(void* device_dst, const void* host, std::size_t bytes, std::string_view what) {
  const auto* src = static_cast<const char*>(host);
  upload(device_dst, static_cast<int64_t>(bytes), 1,
         [src](int64_t r0, int64_t r1, void* dst) { std::memcpy(dst, src + r0, static_cast<std::size_t>(r1 - r0)); }, what);
}

void WeightUploader::fence(cudaStream_t compute) {
  if (!unfenced_) return;
  check(cudaEventRecord(fence_event_, copy_), "weight upload", "fence record");
  check(cudaStreamWaitEvent(compute, fence_event_, 0), "weight upload", "fence wait");
  unfenced_ = false;
}

void WeightUploader::finish(cudaStream_t compute) {
  if (copy_) {
    fence(compute);
    check(cudaStreamSynchronize(copy_), "weight upload", "finish (a copy to the device failed)");
    free_buffers();
    planner_.restart();
  }
  progress_.stop();
}

}  // namespace fp4serve::kernels::cuda
