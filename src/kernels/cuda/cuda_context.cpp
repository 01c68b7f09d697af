#include "kernels/cuda/cuda_context.h"

#include <cstdlib>

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

int select_device(int ordinal) {
  check(cudaSetDevice(ordinal), "context", "device " + std::to_string(ordinal));
  return ordinal;
}

CudaContext::CudaContext(const DeviceInfo& device) : info(device) {
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "context", "stream");
  const char* s = std::getenv("FP4SERVE_CUDA_SYNC");
  sync_each_op = s != nullptr && *s != '\0' && std::string(s) != "0";
}

CudaContext::~CudaContext() {
  if (stream) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
}

}  // namespace fp4serve::kernels::cuda
