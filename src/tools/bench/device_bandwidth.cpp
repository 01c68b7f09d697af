#include "tools/bench/device_bandwidth.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef FP4SERVE_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#endif

namespace fp4serve::tools::bench {

#ifdef FP4SERVE_HAVE_CUDA
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("device copy bandwidth: ") + what + ": " + cudaGetErrorString(e));
}

// Events destroyed on every path (a failed copy throws past the loop).
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

}  // namespace

std::optional<double> measure_device_copy_gbs(kernels::Backend& backend) {
  auto* cuda = dynamic_cast<kernels::cuda::CudaBackend*>(&backend);
  if (!cuda) return std::nullopt;
  const std::size_t bytes = std::size_t{1} << 30;
  const kernels::DeviceBuffer src = backend.allocate(bytes, "copy bandwidth source");
  const kernels::DeviceBuffer dst = backend.allocate(bytes, "copy bandwidth destination");
  backend.synchronize();
  cudaStream_t s = cuda->context().stream;
  EventPair ev;
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    check(cudaEventRecord(ev.start, s), "cudaEventRecord");
    check(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
    check(cudaEventRecord(ev.stop, s), "cudaEventRecord");
    check(cudaEventSynchronize(ev.stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, ev.start, ev.stop), "cudaEventElapsedTime");
    if (i >= 2) ms.push_back(t);  // the first two warm the copy engine and the pages
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(ms[ms.size() / 2]) * 1e6);
}
#else
std::optional<double> measure_device_copy_gbs(kernels::Backend&) { return std::nullopt; }
#endif

}  // namespace fp4serve::tools::bench
