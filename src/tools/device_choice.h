// --device auto|cpu|cuda (vLLM's --device): which backend serve, generate, `bench model` and doctor
// run the model on, decided before any weight is read and logged with the reason.
//
//   auto  the CUDA backend when this binary was built with it and a device answers, else the CPU
//         ("device: cpu (no CUDA device usable: ...)");
//   cuda  the CUDA backend, or an error naming why not (a CPU-only build, no driver, no GPU) --
//         before the weights are loaded;
//   cpu   the CPU backend on this machine's best tier, as before the flag existed.
//
// The decision is a pure function of the flag and a CudaProbe, so it is tested on machines without a
// GPU; probe_cuda() and make_backend() are the only parts that touch the CUDA runtime (compiled only
// when FP4SERVE_HAVE_CUDA is defined for the tools library, i.e. -DFP4SERVE_CUDA=ON).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.h"

namespace CLI {
class App;
}

namespace fp4serve {
class LoadedCheckpoint;
}

namespace fp4serve::tools {

// What this binary and this machine offer: whether the CUDA backend is compiled in, and if so how
// many devices the runtime sees (0 with the reason in `problem`).
struct CudaProbe {
  bool built = false;
  int device_count = 0;
  std::string problem;  // why no device is usable ("" when device_count > 0)
};

// The binary's probe: built=false in a CPU-only build; otherwise cudaGetDeviceCount's answer.
CudaProbe probe_cuda();

enum class DeviceKind { kCpu, kCuda };

struct DeviceChoice {
  DeviceKind kind = DeviceKind::kCpu;
  std::string log_line;  // "device: cpu (no CUDA device usable: ...)", "device: cuda (--device auto: ...)"
};

// Throws std::runtime_error naming the reason for --device cuda without a usable device, and for a
// value other than auto, cpu or cuda.
DeviceChoice choose_device(const std::string& flag, const CudaProbe& probe);

// Registers --device on a subcommand (default auto).
void add_device_flag(CLI::App& cmd, std::string& device);

// The backend for a choice: the CPU backend at its best tier, or the CUDA backend on device 0
// (throws std::runtime_error when it cannot be created: the device vanished, or a CPU-only build).
// `choice` may be turned from cuda to cpu by --device auto when the device fails to initialise;
// its log line then says so.
std::shared_ptr<kernels::Backend> make_backend(DeviceChoice& choice, bool auto_requested);

// Device memory of the CUDA backend's device now (cudaMemGetInfo): {free, total}; {0, 0} for a
// backend that is not CUDA or a CPU-only build.
struct DeviceMemory {
  std::uint64_t free_bytes = 0, total_bytes = 0;
  std::uint64_t free_at_start = 0;  // free when the backend was created (before any weight)
  std::string name;
};
DeviceMemory device_memory(kernels::Backend& backend);
// The same for CUDA device `ordinal` without a backend (doctor's estimate); {} in a CPU-only build
// or when the device cannot be queried.
DeviceMemory query_device_memory(int ordinal);

// The bytes a load of `checkpoint` reads from its files into the model: the text model's planned
// tensors, and the MTP block's when it is bound (`with_mtp`). The vision tower is not counted (it
// stays on the host unless --vision-device same). The CUDA loader's progress line shows it as the
// total ("loading weights to cuda: 12.3 / 22.1 GB"); weights repacked on the way may differ a little.
std::uint64_t planned_weight_bytes(const LoadedCheckpoint& checkpoint, bool with_mtp);
// Tells the CUDA backend's weight loader the total it is about to upload; nothing on other backends.
void expect_weight_bytes(kernels::Backend& backend, std::uint64_t bytes);

// doctor's lines: the CUDA devices (DeviceInfo::describe) or why there are none, and what
// --device auto would pick here.
std::string describe_cuda_devices();

}  // namespace fp4serve::tools
