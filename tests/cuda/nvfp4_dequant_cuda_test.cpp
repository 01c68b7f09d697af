// CUDA kernels against their CPU twins. Needs a GPU: labelled "gpu", run by scripts/gpu-check.sh on
// the GPU machine, excluded from CI's ctest (which only builds it, keeping the toolchain honest).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cuda/nvfp4_dequant.h"
#include "tensor/float_formats.h"
#include "tensor/nvfp4.h"

namespace fp4serve {
namespace {

TEST(CudaNvfp4, DequantMatchesCpuBitExactly) {
  const int64_t rows = 512, cols = 2048;
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(rows * cols);
  for (auto& x : w) x = d(rng);
  const Nvfp4Weight q = nvfp4_quantize(w.data(), rows, cols);
  std::vector<float> cpu(w.size());
  nvfp4_dequantize(q.packed.data(), q.block_scales.data(), q.global_scale, rows, cols, cpu.data());
  std::vector<uint16_t> gpu(w.size());
  const std::string err = cuda::nvfp4_dequantize_bf16_host(q.packed.data(), q.block_scales.data(),
                                                           q.global_scale, rows, cols, gpu.data());
  ASSERT_EQ(err, "") << cuda::describe_devices();
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(gpu[i], f32_to_bf16(cpu[i])) << i;
}

}  // namespace
}  // namespace fp4serve
