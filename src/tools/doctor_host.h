// What `fp4serve doctor` (and serve's preflight) learns about the machine: CPU model and ISA,
// memory, and — through the NVIDIA driver libraries opened at run time, so that a CPU-only build
// needs none of them — the visible GPUs, driver, CUDA and cuDNN versions.
#pragma once

#include <functional>
#include <string>

#include "tools/preflight_checks.h"

namespace fp4serve::tools {

struct CpuReport {
  std::string model_name;  // /proc/cpuinfo "model name" ("unknown" when absent)
  int logical_cores = 1;
};
CpuReport probe_cpu();

// Reads /proc/meminfo and asks libcuda.so.1 / libcudnn.so.9 (dlopen; absence is not an error).
HostInfo probe_host();

// Driver facts that only the report prints (the rules need none of them).
struct GpuStackReport {
  std::string driver_problem;     // "" = libcuda answered; else why no GPU is listed
  std::string nvidia_driver;      // "580.65.06" from libnvidia-ml (empty when unknown)
  int cuda_runtime_version = 0;   // libcudart cudaRuntimeGetVersion (0 = no runtime library found)
};
GpuStackReport probe_gpu_stack();

// "CUDA version" text from a driver/runtime integer: 13000 -> "13.0".
std::string cuda_version_text(int v);

// The fp4serve executable registers its CUDA backend's description here when it is built with
// CUDA (main.cpp under FP4SERVE_HAVE_CUDA: the define exists only for that target). Unset = the
// binary has no CUDA backend.
void set_cuda_backend_describer(std::function<std::string()> describe);
// The registered description, or "" when the binary has no CUDA backend.
std::string describe_cuda_backend();
bool cuda_backend_built();

}  // namespace fp4serve::tools
