#include "tools/doctor_host.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <fstream>
#include <initializer_list>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_features.h"

namespace fp4serve::tools {
namespace {

// The first of `names` that dlopen finds, or nullptr. Handles stay open for the process.
void* open_first(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

template <class Fn>
Fn symbol(void* lib, const char* name) {
  return lib ? reinterpret_cast<Fn>(dlsym(lib, name)) : nullptr;
}

// The CUDA driver API, declared here with plain C types so that no CUDA header is needed.
struct CudaDriver {
  using Init = int (*)(unsigned);
  using Count = int (*)(int*);
  using Get = int (*)(int*, int);
  using Name = int (*)(char*, int, int);
  using Attr = int (*)(int*, int, int);
  using Mem = int (*)(size_t*, int);
  using Version = int (*)(int*);
  static constexpr int kComputeMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  static constexpr int kComputeMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
};

struct DriverProbe {
  std::vector<GpuInfo> gpus;
  int driver_version = 0;
  std::string problem;
};

DriverProbe probe_driver() {
  DriverProbe p;
  void* lib = open_first({"libcuda.so.1", "libcuda.so"});
  if (!lib) {
    p.problem = "no NVIDIA driver (libcuda.so.1 not found)";
    return p;
  }
  auto init = symbol<CudaDriver::Init>(lib, "cuInit");
  auto count = symbol<CudaDriver::Count>(lib, "cuDeviceGetCount");
  auto get = symbol<CudaDriver::Get>(lib, "cuDeviceGet");
  auto name = symbol<CudaDriver::Name>(lib, "cuDeviceGetName");
  auto attr = symbol<CudaDriver::Attr>(lib, "cuDeviceGetAttribute");
  auto mem = symbol<CudaDriver::Mem>(lib, "cuDeviceTotalMem_v2");
  auto version = symbol<CudaDriver::Version>(lib, "cuDriverGetVersion");
  if (!init || !count || !get || !name || !attr || !mem || !version) {
    p.problem = "libcuda.so.1 lacks the driver API entry points";
    return p;
  }
  version(&p.driver_version);
  if (int e = init(0); e != 0) {
    p.problem = fmt::format("the CUDA driver did not initialise (CUresult {})", e);
    return p;
  }
  int n = 0;
  if (int e = count(&n); e != 0) {
    p.problem = fmt::format("cuDeviceGetCount failed (CUresult {})", e);
    return p;
  }
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    if (get(&dev, i) != 0) continue;
    GpuInfo g;
    char buf[256] = {};
    name(buf, sizeof buf, dev);
    g.name = buf;
    attr(&g.sm_major, CudaDriver::kComputeMajor, dev);
    attr(&g.sm_minor, CudaDriver::kComputeMinor, dev);
    size_t bytes = 0;
    mem(&bytes, dev);
    g.memory_bytes = bytes;
    p.gpus.push_back(g);
  }
  if (n == 0) p.problem = "the CUDA driver sees no GPU";
  return p;
}

int probe_cudnn() {
  void* lib = open_first({"libcudnn.so.9", "libcudnn.so"});
  auto fn = symbol<size_t (*)()>(lib, "cudnnGetVersion");
  return fn ? static_cast<int>(fn()) : 0;
}

std::pair<uint64_t, uint64_t> meminfo() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kb = 0, total = 0, avail = 0;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:") total = kb * 1024;
    if (key == "MemAvailable:") avail = kb * 1024;
  }
  return {total, avail};
}

std::mutex g_cuda_mu;
std::function<std::string()> g_cuda_describer;

}  // namespace

CpuReport probe_cpu() {
  CpuReport r;
  r.model_name = "unknown";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) r.model_name = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  r.logical_cores = kernels::cpu::cpu_features().logical_cores;
  return r;
}

HostInfo probe_host() {
  HostInfo h;
  std::tie(h.mem_total_bytes, h.mem_available_bytes) = meminfo();
  const DriverProbe d = probe_driver();
  h.gpus = d.gpus;
  h.cuda_driver_version = d.driver_version;
  h.cudnn_version = h.gpus.empty() ? 0 : probe_cudnn();
  h.gpu_backend = false;  // serve and doctor set it from --device (device_choice.h)
  return h;
}

GpuStackReport probe_gpu_stack() {
  GpuStackReport r;
  r.driver_problem = probe_driver().problem;
  if (void* nvml = open_first({"libnvidia-ml.so.1", "libnvidia-ml.so"})) {
    auto init = symbol<int (*)()>(nvml, "nvmlInit_v2");
    auto ver = symbol<int (*)(char*, unsigned)>(nvml, "nvmlSystemGetDriverVersion");
    if (init && ver && init() == 0) {
      char buf[96] = {};
      if (ver(buf, sizeof buf) == 0) r.nvidia_driver = buf;
    }
  }
  void* rt = open_first({"libcudart.so.13", "libcudart.so.12", "libcudart.so"});
  if (auto fn = symbol<int (*)(int*)>(rt, "cudaRuntimeGetVersion")) fn(&r.cuda_runtime_version);
  return r;
}

std::string cuda_version_text(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

void set_cuda_backend_describer(std::function<std::string()> describe) {
  std::lock_guard lock(g_cuda_mu);
  g_cuda_describer = std::move(describe);
}

std::string describe_cuda_backend() {
  std::lock_guard lock(g_cuda_mu);
  return g_cuda_describer ? g_cuda_describer() : "";
}

bool cuda_backend_built() {
  std::lock_guard lock(g_cuda_mu);
  return static_cast<bool>(g_cuda_describer);
}

}  // namespace fp4serve::tools
