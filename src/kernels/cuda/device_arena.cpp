#include "kernels/cuda/device_arena.h"

#include <spdlog/spdlog.h>

#include <cstring>

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

DeviceArena::~DeviceArena() {
  for (void* c : chunks_) cudaFree(c);
}

void* DeviceArena::allocate(std::size_t bytes, std::string_view what) {
  bytes = align_up(std::max<std::size_t>(bytes, 1));
  if (bytes > left_) {
    const std::size_t size = std::max(chunk_, bytes);
    void* p = nullptr;
    check(cudaMalloc(&p, size), "allocate " + purpose_, std::string(what) + ": " + std::to_string(size) + " bytes",
          "arena holds " + std::to_string(reserved_) + " bytes");
    chunks_.push_back(p);
    cursor_ = static_cast<char*>(p);
    left_ = size;
    reserved_ += size;
  }
  void* out = cursor_;
  cursor_ += bytes;
  left_ -= bytes;
  used_ += bytes;
  return out;
}

ScratchArena::~ScratchArena() {
  release_retired();
  if (base_) cudaFree(base_);
}

void ScratchArena::reserve(std::size_t bytes) {
  bytes = align_up(bytes);
  if (bytes <= capacity_) return;
  if (base_) retired_.push_back(base_);
  base_ = nullptr;
  check(cudaMalloc(&base_, bytes), "reserve scratch", std::to_string(bytes) + " bytes");
  capacity_ = bytes;
}

void* ScratchArena::take(std::size_t bytes, std::string_view what) {
  bytes = align_up(std::max<std::size_t>(bytes, 1));
  if (offset_ + bytes > capacity_) {
    // Beyond the limits reserve() was given: grow for the rest of the run. The op's earlier takes
    // stay valid (their block is retired, not freed, until the stream has been synchronized).
    const std::size_t want = std::max(capacity_ * 2, offset_ + bytes + (16u << 20));
    spdlog::warn("cuda scratch: {} needs {} bytes beyond the {} reserved; growing to {} (a step past the start-up limits)",
                 what, offset_ + bytes - capacity_, capacity_, want);
    if (base_) retired_.push_back(base_);
    base_ = nullptr;
    // A growth inside a step graph's capture (thread-local capture mode forbids cudaMalloc on this
    // thread): allocate in relaxed mode; capture_step then captures again, the arena now large enough.
    cudaStreamCaptureMode relaxed = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&relaxed);
    const cudaError_t grown = cudaMalloc(&base_, want);
    cudaThreadExchangeStreamCaptureMode(&relaxed);
    check(grown, "grow scratch", std::string(what) + ": " + std::to_string(want) + " bytes");
    capacity_ = want;
    offset_ = 0;
    ++growths_;
  }
  void* p = static_cast<char*>(base_) + offset_;
  offset_ += bytes;
  return p;
}

void ScratchArena::release_retired() {
  for (void* p : retired_) cudaFree(p);
  retired_.clear();
}

StagingRing::StagingRing(std::size_t half_bytes) : half_(align_up(half_bytes)) {
  check(cudaHostAlloc(reinterpret_cast<void**>(&pinned_), 2 * half_, cudaHostAllocDefault), "staging ring",
        "pinned " + std::to_string(2 * half_) + " bytes");
  check(cudaMalloc(reinterpret_cast<void**>(&device_), 2 * half_), "staging ring", "device " + std::to_string(2 * half_) + " bytes");
  for (cudaEvent_t& e : done_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "staging ring", "event");
}

StagingRing::~StagingRing() {
  for (cudaEvent_t e : done_)
    if (e) cudaEventDestroy(e);
  if (device_) cudaFree(device_);
  if (pinned_) cudaFreeHost(pinned_);
}

void* StagingRing::upload(const void* host, std::size_t bytes, cudaStream_t stream, void* fallback) {
  if (bytes == 0) return device_;
  const std::size_t need = align_up(bytes, 16);
  if (need > half_) {
    if (fallback == nullptr) throw CudaError("staging upload", std::to_string(bytes) + " bytes with no fallback", cudaErrorInvalidValue);
    check(cudaMemcpyAsync(fallback, host, bytes, cudaMemcpyHostToDevice, stream), "staging upload (large)");
    check(cudaStreamSynchronize(stream), "staging upload (large)");
    return fallback;
  }
  if (offset_ + need > half_) {
    // Switch halves: mark this one busy until the stream passes this point, and wait for the other
    // half's readers (copies and kernels enqueued before it was switched away from).
    check(cudaEventRecord(done_[current_], stream), "staging ring", "record");
    pending_[current_] = true;
    current_ ^= 1;
    if (pending_[current_]) check(cudaEventSynchronize(done_[current_]), "staging ring", "wait");
    pending_[current_] = false;
    offset_ = 0;
  }
  char* src = pinned_ + current_ * half_ + offset_;
  char* dst = device_ + current_ * half_ + offset_;
  std::memcpy(src, host, bytes);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "staging upload");
  offset_ += need;
  return dst;
}

}  // namespace fp4serve::kernels::cuda
