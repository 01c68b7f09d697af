#include "kernels/cuda/weight_upload.h"

#include <string>

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

CudaStagingTarget::~CudaStagingTarget() {
  // The loader has drained and released its buffers (it is destroyed first).
  for (cudaEvent_t e : done_)
    if (e) cudaEventDestroy(e);
  if (fence_event_) cudaEventDestroy(fence_event_);
  if (copy_) {
    cudaStreamSynchronize(copy_);
    cudaStreamDestroy(copy_);
  }
}

void CudaStagingTarget::ensure_stream() {
  if (copy_) return;
  check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "weight upload", "copy stream");
  check(cudaEventCreateWithFlags(&fence_event_, cudaEventDisableTiming), "weight upload", "event");
  done_.assign(static_cast<std::size_t>(buffers_), nullptr);
  for (cudaEvent_t& e : done_) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "weight upload", "event");
}

char* CudaStagingTarget::allocate(std::size_t bytes) {
  ensure_stream();
  void* p = nullptr;
  check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault), "weight upload",
        "pinned staging buffer of " + std::to_string(bytes) + " bytes");
  return static_cast<char*>(p);
}

void CudaStagingTarget::release(char* buffer) { cudaFreeHost(buffer); }

void CudaStagingTarget::copy(void* device_dst, const char* staged, std::size_t bytes) {
  check(cudaMemcpyAsync(device_dst, staged, bytes, cudaMemcpyHostToDevice, copy_), "weight upload",
        "copy of " + std::to_string(bytes) + " bytes");
}

void CudaStagingTarget::record(int buffer) {
  check(cudaEventRecord(done_[static_cast<std::size_t>(buffer)], copy_), "weight upload", "record");
}

void CudaStagingTarget::wait(int buffer) {
  check(cudaEventSynchronize(done_[static_cast<std::size_t>(buffer)]), "weight upload",
        "staging buffer reuse (a copy to the device failed)");
}

void CudaStagingTarget::drain() {
  if (copy_) check(cudaStreamSynchronize(copy_), "weight upload", "end of loading (a copy to the device failed)");
}

void CudaStagingTarget::fence(cudaStream_t compute) {
  if (!copy_) return;
  check(cudaEventRecord(fence_event_, copy_), "weight upload", "fence record");
  check(cudaStreamWaitEvent(compute, fence_event_, 0), "weight upload", "fence wait");
}

}  // namespace fp4serve::kernels::cuda
