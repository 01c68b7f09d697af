// device_choice: --device auto|cpu|cuda decided from a probe (fake ones here, so every branch runs on
// a machine without a GPU), and the binary's own probe on this machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/weight_loader.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_features.h"
#include "tools/device_choice.h"

namespace fp4serve::tools {
namespace {

using ::testing::HasSubstr;

CudaProbe cpu_only_build() { return {false, 0, "this binary was built without the CUDA backend (configure with -DFP4SERVE_CUDA=ON)"}; }
CudaProbe no_gpu() { return {true, 0, "the CUDA runtime sees no device (no NVIDIA driver, or no GPU visible)"}; }
CudaProbe one_gpu() { return {true, 1, ""}; }

TEST(DeviceChoice, CpuIsTheCpuWhateverTheMachine) {
  for (const CudaProbe& p : {cpu_only_build(), no_gpu(), one_gpu()}) {
    const DeviceChoice c = choose_device("cpu", p);
    EXPECT_EQ(c.kind, DeviceKind::kCpu);
    EXPECT_EQ(c.log_line, "device: cpu (--device cpu)");
  }
}

TEST(DeviceChoice, AutoTakesTheGpuWhenOneIsUsableAndSaysWhyNotOtherwise) {
  EXPECT_EQ(choose_device("auto", one_gpu()).kind, DeviceKind::kCuda);
  EXPECT_THAT(choose_device("auto", one_gpu()).log_line, HasSubstr("device: cuda (--device auto: 1 CUDA device(s)"));
  const DeviceChoice none = choose_device("auto", no_gpu());
  EXPECT_EQ(none.kind, DeviceKind::kCpu);
  EXPECT_EQ(none.log_line, "device: cpu (no CUDA device usable: the CUDA runtime sees no device (no NVIDIA driver, "
                           "or no GPU visible))");
  const DeviceChoice unbuilt = choose_device("auto", cpu_only_build());
  EXPECT_EQ(unbuilt.kind, DeviceKind::kCpu);
  EXPECT_THAT(unbuilt.log_line, HasSubstr("device: cpu (no CUDA device usable: this binary was built without"));
}

TEST(DeviceChoice, CudaWithoutADeviceIsAnErrorNamingTheReason) {
  EXPECT_EQ(choose_device("cuda", one_gpu()).kind, DeviceKind::kCuda);
  for (const CudaProbe& p : {cpu_only_build(), no_gpu()}) {
    try {
      choose_device("cuda", p);
      FAIL() << "--device cuda accepted without a device";
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("--device cuda: no CUDA device usable: " + p.problem));
    }
  }
}

TEST(DeviceChoice, UnknownDevicesAreRefused) {
  for (const char* bad : {"gpu", "CUDA", "", "tpu"}) {
    try {
      choose_device(bad, one_gpu());
      FAIL() << bad;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("use auto, cpu or cuda"));
    }
  }
}

TEST(DeviceChoice, ThisMachinesProbeAndTheCpuBackend) {
  const CudaProbe p = probe_cuda();
  if (p.device_count == 0) {
    EXPECT_FALSE(p.problem.empty());
  }
  DeviceChoice cpu = choose_device("cpu", p);
  const auto backend = make_backend(cpu, false);
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->device(), kernels::Device::kCpu);
  EXPECT_EQ(device_memory(*backend).total_bytes, 0u);  // not a device backend
  const std::string doctor = describe_cuda_devices();
  EXPECT_THAT(doctor, HasSubstr("<- what --device auto picks here"));
  if (p.device_count == 0) {
    EXPECT_THAT(doctor, HasSubstr("CUDA devices: none usable: " + p.problem));
  }
}

// The total of the CUDA loader's progress line: every tensor of the checkpoint's files that the
// text model loads, the MTP block's only when it is bound. tiny-bf16 has an MTP block in its own file.
TEST(DeviceChoice, PlannedWeightBytesAreTheFilesTensorsTheModelLoads) {
  const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-bf16";
  const LoadedCheckpoint ck = LoadedCheckpoint::open(dir.string());
  ASSERT_TRUE(ck.has_mtp());
  uint64_t text = 0, mtp = 0, other = 0;
  for (const std::string& name : ck.files().tensor_names()) {
    const uint64_t n = ck.files().find(name).info->byte_size;
    (name.rfind("mtp.", 0) == 0 ? mtp : name.rfind("model.visual.", 0) == 0 ? other : text) += n;
  }
  EXPECT_GT(text, 0u);
  EXPECT_GT(mtp, 0u);
  EXPECT_EQ(planned_weight_bytes(ck, false), text);
  EXPECT_EQ(planned_weight_bytes(ck, true), text + mtp);
  // A backend without a device loader ignores the total (the CPU packs its own panels).
  kernels::cpu::CpuBackend cpu(kernels::cpu::active_isa());
  expect_weight_bytes(cpu, text);
}

}  // namespace
}  // namespace fp4serve::tools
