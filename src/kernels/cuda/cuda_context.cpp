#include "kernels/cuda/cuda_context.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

int select_device(int ordinal) {
  check(cudaSetDevice(ordinal), "context", "device " + std::to_string(ordinal));
  return ordinal;
}

std::size_t staging_buffer_bytes() {
  const char* s = std::getenv("FP4SERVE_CUDA_STAGING_BYTES");
  if (s == nullptr || *s == '\0') return WeightUploader::kBufferBytes;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (end == s || *end != '\0' || v < 4096 || v > (1ull << 34)) {
    spdlog::warn("FP4SERVE_CUDA_STAGING_BYTES={} is not a byte count from 4096 to 16 GiB; using {}", s,
                 WeightUploader::kBufferBytes);
    return WeightUploader::kBufferBytes;
  }
  return static_cast<std::size_t>(v);
}

CudaContext::CudaContext(const DeviceInfo& device) : info(device) {
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "context", "stream");
  const char* s = std::getenv("FP4SERVE_CUDA_SYNC");
  sync_each_op = s != nullptr && *s != '\0' && std::string(s) != "0";
}

const void* CudaContext::upload_slot(const void* host, std::size_t bytes, std::string_view what) {
  // No copy is captured here: the graph copies all its slots at once, before its first node
  // (GraphInstance::instantiate), each slot being written once per forward and read only after.
  UploadSlot& slot = graph.next_upload(bytes, what, true);
  std::memcpy(slot.host, host, bytes);
  return slot.device;
}

CudaContext::~CudaContext() {
  if (stream) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  if (graph_tables.buffer) cudaFree(graph_tables.buffer);
}

}  // namespace fp4serve::kernels::cuda
