#include "tools/device_choice.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <stdexcept>

#include "checkpoint/weight_loader.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_features.h"
#ifdef FP4SERVE_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_info.h"
#endif

namespace fp4serve::tools {

CudaProbe probe_cuda() {
  CudaProbe p;
#ifdef FP4SERVE_HAVE_CUDA
  p.built = true;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error, as kernels::cuda::device_count() does
    p.problem = fmt::format("the CUDA runtime found no device (cudaGetDeviceCount: {})", cudaGetErrorString(e));
    n = 0;
  } else if (n == 0) {
    p.problem = "the CUDA runtime found no device (no GPU visible)";
  }
  p.device_count = n;
#else
  p.problem = "this binary was built without the CUDA backend (configure with -DFP4SERVE_CUDA=ON)";
#endif
  return p;
}

DeviceChoice choose_device(const std::string& flag, const CudaProbe& probe) {
  DeviceChoice c;
  const bool usable = probe.built && probe.device_count > 0;
  const std::string why_not = probe.problem.empty() ? std::string("no CUDA device") : probe.problem;
  if (flag == "cpu") {
    c.kind = DeviceKind::kCpu;
    c.log_line = "device: cpu (--device cpu)";
  } else if (flag == "cuda") {
    if (!usable) throw std::runtime_error("--device cuda: no CUDA device usable: " + why_not + " (use --device cpu or auto)");
    c.kind = DeviceKind::kCuda;
    c.log_line = fmt::format("device: cuda (--device cuda; {} device(s) visible, using device 0)", probe.device_count);
  } else if (flag == "auto") {
    if (usable) {
      c.kind = DeviceKind::kCuda;
      c.log_line = fmt::format("device: cuda (--device auto: {} CUDA device(s) visible, using device 0)",
                               probe.device_count);
    } else {
      c.kind = DeviceKind::kCpu;
      c.log_line = "device: cpu (no CUDA device usable: " + why_not + ")";
    }
  } else {
    throw std::runtime_error(fmt::format("--device {}: use auto, cpu or cuda", flag));
  }
  return c;
}

void add_device_flag(CLI::App& cmd, std::string& device) {
  cmd.add_option("--device", device,
                 "auto|cpu|cuda: where the model runs (auto: the CUDA GPU when this build has the CUDA backend and "
                 "a device answers, else the CPU)")
      ->capture_default_str();
}

std::shared_ptr<kernels::Backend> make_backend(DeviceChoice& choice, bool auto_requested) {
  if (choice.kind == DeviceKind::kCuda) {
#ifdef FP4SERVE_HAVE_CUDA
    try {
      std::unique_ptr<kernels::Backend> cuda = kernels::cuda::make_cuda_backend_if_present(0);
      if (!cuda) throw std::runtime_error("the CUDA runtime no longer sees device 0");
      choice.log_line += ": " + cuda->describe();
      return std::shared_ptr<kernels::Backend>(std::move(cuda));
    } catch (const std::exception& e) {
      if (!auto_requested) throw std::runtime_error(fmt::format("--device cuda: {}", e.what()));
      choice.kind = DeviceKind::kCpu;
      choice.log_line = fmt::format("device: cpu (no CUDA device usable: device 0 failed to initialise: {})", e.what());
    }
#else
    throw std::runtime_error("--device cuda: this binary was built without the CUDA backend");
#endif
  }
  return std::make_shared<kernels::cpu::CpuBackend>(kernels::cpu::active_isa());
}

DeviceMemory device_memory(kernels::Backend& backend) {
  DeviceMemory m;
#ifdef FP4SERVE_HAVE_CUDA
  if (auto* cuda = dynamic_cast<kernels::cuda::CudaBackend*>(&backend)) {
    const kernels::cuda::DeviceInfo now = kernels::cuda::query_device(cuda->info().ordinal);
    m.free_bytes = now.free_memory;
    m.total_bytes = now.total_memory;
    m.free_at_start = cuda->info().free_memory;
    m.name = now.name;
  }
#else
  (void)backend;
#endif
  return m;
}

DeviceMemory query_device_memory(int ordinal) {
  DeviceMemory m;
#ifdef FP4SERVE_HAVE_CUDA
  try {
    const kernels::cuda::DeviceInfo d = kernels::cuda::query_device(ordinal);
    m.free_bytes = m.free_at_start = d.free_memory;
    m.total_bytes = d.total_memory;
    m.name = d.name;
  } catch (const std::exception&) {
    return {};
  }
#else
  (void)ordinal;
#endif
  return m;
}

std::uint64_t planned_weight_bytes(const LoadedCheckpoint& checkpoint, bool with_mtp) {
  return checkpoint.plan().total_bytes() + (with_mtp ? checkpoint.mtp_plan().total_bytes() : 0);
}

void expect_weight_bytes(kernels::Backend& backend, std::uint64_t bytes) {
#ifdef FP4SERVE_HAVE_CUDA
  if (auto* cuda = dynamic_cast<kernels::cuda::CudaBackend*>(&backend)) cuda->expect_weight_bytes(bytes);
#else
  (void)backend;
  (void)bytes;
#endif
}

std::string describe_cuda_devices() {
  const CudaProbe p = probe_cuda();
  std::string out;
#ifdef FP4SERVE_HAVE_CUDA
  for (int i = 0; i < p.device_count; ++i) {
    try {
      out += fmt::format("CUDA device {}: {}\n", i, kernels::cuda::query_device(i).describe());
    } catch (const std::exception& e) {
      out += fmt::format("CUDA device {}: cannot be queried: {}\n", i, e.what());
    }
  }
#endif
  if (p.device_count == 0) out += "CUDA devices: none usable: " + p.problem + "\n";
  out += choose_device("auto", p).log_line + " <- what --device auto picks here\n";
  return out;
}

}  // namespace fp4serve::tools
