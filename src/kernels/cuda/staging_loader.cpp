#include "kernels/cuda/staging_loader.h"

#include <spdlog/spdlog.h>

#include <cstring>

namespace fp4serve::kernels::cuda {

StagingLoader::StagingLoader(StagingTarget& target, std::size_t buffer_bytes, int buffers, LoadProgress progress)
    : target_(target), planner_(buffer_bytes, buffers), progress_(std::move(progress)) {}

StagingLoader::~StagingLoader() {
  try {
    if (!buffers_.empty()) target_.drain();
  } catch (...) {  // a failed copy has been reported by the call that saw it, or never will be
  }
  release_buffers();
}

void StagingLoader::allocate_buffers() {
  busy_.assign(static_cast<std::size_t>(planner_.buffers()), false);
  for (int i = 0; i < planner_.buffers(); ++i) buffers_.push_back(target_.allocate(planner_.buffer_bytes()));
}

// Only with every copy drained: no copy reads a buffer.
void StagingLoader::release_buffers() {
  for (char* b : buffers_) target_.release(b);
  buffers_.clear();
  busy_.assign(busy_.size(), false);
}

void StagingLoader::upload(void* device_dst, int64_t rows, std::size_t row_bytes, const Fill& fill,
                           std::string_view what) {
  if (rows <= 0 || row_bytes == 0) return;
  if (buffers_.empty()) allocate_buffers();
  progress_.start();
  char* out = static_cast<char*>(device_dst);
  for (const StagingPiece& p : planner_.place(rows, row_bytes)) {
    if (p.grows) {
      target_.drain();
      release_buffers();
      allocate_buffers();
      spdlog::info("weight upload: a row of {} bytes of {} outgrows the staging buffers; they grow to {} bytes", row_bytes,
                   what, planner_.buffer_bytes());
    }
    if (p.enters_buffer) {
      // The buffer left stays busy until the copies enqueued from it are done; the one entered may
      // still be read by its own earlier copies: wait for them before writing.
      const auto left = static_cast<std::size_t>(p.left_buffer), entered = static_cast<std::size_t>(p.buffer);
      target_.record(p.left_buffer);
      busy_[left] = true;
      if (busy_[entered]) {
        target_.wait(p.buffer);
        busy_[entered] = false;
      }
    }
    char* staged = buffers_[static_cast<std::size_t>(p.buffer)] + p.offset;
    fill(p.row0, p.row1, staged);
    target_.copy(out + static_cast<std::size_t>(p.row0) * row_bytes, staged, p.bytes);
    unfenced_ = true;
    if (auto line = progress_.add(p.bytes)) spdlog::info("{}", *line);
  }
}

void StagingLoader::upload_bytes(void* device_dst, const void* host, std::size_t bytes, std::string_view what) {
  const auto* src = static_cast<const char*>(host);
  upload(device_dst, static_cast<int64_t>(bytes), 1,
         [src](int64_t r0, int64_t r1, void* dst) { std::memcpy(dst, src + r0, static_cast<std::size_t>(r1 - r0)); }, what);
}

void StagingLoader::finish() {
  if (!buffers_.empty()) {
    target_.drain();
    release_buffers();
    planner_.restart();
  }
  progress_.stop();
}

}  // namespace fp4serve::kernels::cuda
