// The CUDA backend's host side, on any machine: what a build with CUDA does where no GPU is (a clean
// nullptr, never a crash or an exception from the driver probe) and how its errors read. The kernels
// themselves are tested against the CPU ops by the backend op harness on a GPU (label "gpu").
#if defined(FP4SERVE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/cuda_limits.h"
#include "kernels/cuda/device_arena.h"
#include "kernels/cuda/device_info.h"

namespace fp4serve::kernels::cuda {
namespace {

TEST(CudaRuntime, NoDeviceMeansNoBackendAndNoThrow) {
  const int n = device_count();
  ASSERT_GE(n, 0);
  if (n > 0) {
    auto b = make_cuda_backend_if_present();
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->device(), Device::kCuda);
    EXPECT_NE(b->describe().find("sm_"), std::string::npos) << b->describe();
    return;
  }
  std::unique_ptr<Backend> b;
  EXPECT_NO_THROW(b = make_cuda_backend_if_present());
  EXPECT_EQ(b, nullptr);
  // A second probe is as clean as the first (the driver's "no device" error is not left sticky).
  EXPECT_EQ(device_count(), 0);
  EXPECT_EQ(make_cuda_backend_if_present(3), nullptr);
}

TEST(CudaRuntime, ErrorsNameTheOpAndTheShapes) {
  uint16_t dummy[4] = {};
  TensorView x = TensorView::contiguous(dummy, DType::kBF16, {7, 2048}, Device::kCuda);
  TensorView strided = x;
  strided.shape[1] = 1024;
  try {
    check(cudaErrorIllegalAddress, "rmsnorm", x, strided, "eps 1e-6");
    FAIL() << "check did not throw";
  } catch (const CudaError& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code, cudaErrorIllegalAddress);
    EXPECT_NE(m.find("cuda rmsnorm [BF16 [7, 2048], BF16 [7, 1024] rows strided, eps 1e-6]: "), std::string::npos) << m;
    EXPECT_NE(m.find(cudaGetErrorString(cudaErrorIllegalAddress)), std::string::npos) << m;
  }
  EXPECT_NO_THROW(check(cudaSuccess, "rmsnorm", x));
}

TEST(CudaRuntime, LimitsAndAlignment) {
  EXPECT_EQ(kMaxSmemPerBlockSm120, 101376u);  // 99 KB: the consumer Blackwell opt-in maximum
  EXPECT_EQ(kMaxSmemPerBlockSm90, 232448u);   // 227 KB: Hopper's
  EXPECT_EQ(align_up(1), kDeviceAlign);
  EXPECT_EQ(align_up(256), 256u);
  EXPECT_EQ(align_up(257), 512u);
  EXPECT_EQ(align_up(17, 16), 32u);
}

}  // namespace
}  // namespace fp4serve::kernels::cuda

#endif  // FP4SERVE_HAVE_CUDA
