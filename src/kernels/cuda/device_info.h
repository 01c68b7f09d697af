// What the CUDA backend needs to know about its device, read once at start-up: the architecture
// (kernels pick their variant from it), SM count (grid sizing), the shared memory a block may opt in
// to (99 KB on sm_120, 227 KB on sm_90: the seeds' crash class is a kernel that asks for more),
// memory, and the measured figures doctor and the op benchmark print.
#pragma once

#include <cstddef>
#include <string>

namespace fp4serve::kernels::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;          // compute capability
  int sm_count = 0;
  std::size_t smem_per_block_optin = 0;  // bytes a block may opt in to (cudaFuncAttributeMaxDynamicSharedMemorySize)
  std::size_t smem_per_sm = 0;
  std::size_t l2_bytes = 0;
  std::size_t total_memory = 0, free_memory = 0;
  int driver_version = 0, runtime_version = 0;
  int sm() const { return major * 10 + minor; }  // 90, 120
  // "NVIDIA H200 (sm_90, 132 SMs, 227 KB smem/block, 139.8 GiB, driver 13.0)"
  std::string describe() const;
};

// Number of usable devices (0 when no driver or no GPU; never throws).
int device_count();
// Queries `ordinal`; throws CudaError when it cannot.
DeviceInfo query_device(int ordinal);

}  // namespace fp4serve::kernels::cuda
