// doctor_host: what the machine probe reports on this (GPU-less or not) machine, and the CUDA
// backend hook main.cpp sets in CUDA builds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"
#include "tools/doctor_host.h"

namespace fp4serve::tools {
namespace {

TEST(DoctorHost, MemoryAndCpuAreRead) {
  const HostInfo h = probe_host();
  EXPECT_GT(h.mem_total_bytes, 0u);
  EXPECT_GT(h.mem_available_bytes, 0u);
  EXPECT_LE(h.mem_available_bytes, h.mem_total_bytes);
  EXPECT_FALSE(h.gpu_backend);  // set by serve/doctor from --device, not by the probe
  const CpuReport c = probe_cpu();
  EXPECT_FALSE(c.model_name.empty());
  EXPECT_EQ(c.logical_cores, kernels::cpu::cpu_features().logical_cores);
}

TEST(DoctorHost, GpusComeWithTheirComputeCapability) {
  const HostInfo h = probe_host();
  // On a machine without the NVIDIA driver this is empty; with one, every GPU has an SM version.
  for (const GpuInfo& g : h.gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GE(g.sm_major, 3);
    EXPECT_GT(g.memory_bytes, 0u);
  }
  if (h.gpus.empty()) EXPECT_FALSE(probe_gpu_stack().driver_problem.empty());
}

TEST(DoctorHost, CudaVersionText) {
  EXPECT_EQ(cuda_version_text(13000), "13.0");
  EXPECT_EQ(cuda_version_text(12080), "12.8");
}

TEST(DoctorHost, CudaBackendHook) {
  EXPECT_FALSE(cuda_backend_built());
  EXPECT_EQ(describe_cuda_backend(), "");
  set_cuda_backend_describer([] { return std::string("NVIDIA H200 (sm_90, 143771 MiB); driver 13.0, runtime 13.0"); });
  EXPECT_TRUE(cuda_backend_built());
  EXPECT_THAT(describe_cuda_backend(), ::testing::HasSubstr("sm_90"));
  set_cuda_backend_describer(nullptr);
  EXPECT_FALSE(cuda_backend_built());
}

}  // namespace
}  // namespace fp4serve::tools
