// Device memory by purpose, so that no step calls cudaMalloc (docs/ARCHITECTURE.md, "The CUDA backend"):
//
//   DeviceArena    weights: bump allocation in large chunks at load time, freed with the backend.
//   ScratchArena   an op's temporaries (MoE routing tables, split-KV partials, sampling rows): reset at
//                  the start of every op and reused by the next one (ops are ordered on one stream, so
//                  the next op's kernels run after the last op's finished). Sized by reserve() for the
//                  step limits; a request beyond them grows it once (logged) and the old block is kept
//                  until the next synchronize(), since kernels still in flight may read it.
//   StagingRing    small host-to-device uploads an op makes per call (per-sequence descriptors, block
//                  tables, sampling options): copied into pinned memory, then to a device ring on the
//                  stream. Two halves; switching halves waits for the event recorded when the other half
//                  was last switched away from, so a region is never rewritten while a copy or a kernel
//                  that reads it can still be pending.
//
// Buffers the model asks for (Backend::allocate: KV cache, GDN state, step workspace, logits) are one
// cudaMalloc each, at start-up, accounted by name (allocations()).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp4serve::kernels::cuda {

constexpr std::size_t kDeviceAlign = 256;

inline std::size_t align_up(std::size_t n, std::size_t a = kDeviceAlign) { return (n + a - 1) / a * a; }

class DeviceArena {
 public:
  DeviceArena(std::string purpose, std::size_t chunk_bytes) : purpose_(std::move(purpose)), chunk_(chunk_bytes) {}
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // `bytes` of device memory aligned to kDeviceAlign; throws CudaError naming `what` when out of memory.
  void* allocate(std::size_t bytes, std::string_view what);
  std::size_t used() const { return used_; }
  std::size_t reserved() const { return reserved_; }

 private:
  std::string purpose_;
  std::size_t chunk_;
  std::vector<void*> chunks_;
  char* cursor_ = nullptr;
  std::size_t left_ = 0;
  std::size_t used_ = 0, reserved_ = 0;
};

class ScratchArena {
 public:
  ScratchArena() = default;
  ~ScratchArena();
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;

  // Makes room for `bytes` per op (start-up).
  void reserve(std::size_t bytes);
  // Starts an op: everything taken before may be reused.
  void reset() { offset_ = 0; }
  // `bytes` for the current op. Grows (and counts a growth) when the reservation is exceeded.
  void* take(std::size_t bytes, std::string_view what);
  template <class T>
  T* take_n(std::size_t n, std::string_view what) {
    return static_cast<T*>(take(n * sizeof(T), what));
  }
  // Frees blocks replaced by a growth: call after the stream is synchronized.
  void release_retired();
  std::size_t capacity() const { return capacity_; }
  int growths() const { return growths_; }

 private:
  void* base_ = nullptr;
  std::size_t capacity_ = 0, offset_ = 0;
  std::vector<void*> retired_;
  int growths_ = 0;
};

class StagingRing {
 public:
  explicit StagingRing(std::size_t half_bytes = 8u << 20);
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // Copies `bytes` from host memory to a device region that holds them for every kernel enqueued on
  // `stream` after this call; returns that device pointer. Uploads larger than half the ring go
  // through `fallback` (scratch) with a synchronous copy.
  void* upload(const void* host, std::size_t bytes, cudaStream_t stream, void* fallback);
  template <class T>
  const T* upload(std::span<const T> host, cudaStream_t stream, void* fallback = nullptr) {
    return static_cast<const T*>(upload(host.data(), host.size_bytes(), stream, fallback));
  }
  std::size_t half_bytes() const { return half_; }

 private:
  std::size_t half_;
  char* pinned_ = nullptr;
  char* device_ = nullptr;
  cudaEvent_t done_[2] = {nullptr, nullptr};
  bool pending_[2] = {false, false};
  int current_ = 0;
  std::size_t offset_ = 0;
};

}  // namespace fp4serve::kernels::cuda
