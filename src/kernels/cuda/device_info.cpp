#include "kernels/cuda/device_info.h"

#include <fmt/format.h>

#include "kernels/cuda/cuda_error.h"

namespace fp4serve::kernels::cuda {

std::string DeviceInfo::describe() const {
  return fmt::format("{} (sm_{}{}, {} SMs, {} KB smem/block, {:.1f} GiB, driver {}.{})", name, major, minor, sm_count,
                     smem_per_block_optin / 1024, static_cast<double>(total_memory) / (1u << 30), driver_version / 1000,
                     driver_version % 1000 / 10);
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error so later calls start clean
    return 0;
  }
  return n;
}

DeviceInfo query_device(int ordinal) {
  DeviceInfo d;
  d.ordinal = ordinal;
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, ordinal), "query_device", fmt::format("device {}", ordinal));
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.smem_per_block_optin = p.sharedMemPerBlockOptin;
  d.smem_per_sm = p.sharedMemPerMultiprocessor;
  d.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  check(cudaSetDevice(ordinal), "query_device", fmt::format("device {}", ordinal));
  check(cudaMemGetInfo(&d.free_memory, &d.total_memory), "query_device", "cudaMemGetInfo");
  cudaDriverGetVersion(&d.driver_version);
  cudaRuntimeGetVersion(&d.runtime_version);
  return d;
}

}  // namespace fp4serve::kernels::cuda
