// The CUDA kernels' element-wise math (src/kernels/cuda/elementwise_math.h, host and device in one
// source) against the CPU twins' formulas (kernels/activation.h), on the host: every bf16 input.
// The kernels apply these to bf16 values (bias_activation's y, rmsnorm_gated's z) and round the
// result to bf16 (gelu) or multiply it by a bf16 value before rounding (silu), so exhausting the
// 65536 bf16 bit patterns covers every input the ops can see.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cuda/elementwise_math.h"

namespace fp4serve::kernels {
namespace {

bool same_float(float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub || (std::isnan(a) && std::isnan(b));
}

template <class Ours, class Cpu>
int mismatches_over_bf16(Ours ours, Cpu cpu, bool rounded, float* first_bad) {
  int bad = 0;
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const float x = bf16_bits_to_f32(static_cast<uint16_t>(bits));
    float a = ours(x), b = cpu(x);
    if (rounded) a = round_bf16(a), b = round_bf16(b);
    if (!same_float(a, b)) {
      if (bad++ == 0) *first_bad = x;
    }
  }
  return bad;
}

TEST(CudaElementwiseMath, SiluIsTheCpuSiluOnEveryBf16Input) {
  float first = 0;
  // In fp32, before any rounding: rmsnorm_gated multiplies silu(z) by another value.
  EXPECT_EQ(mismatches_over_bf16(cuda::elem::silu_f32, silu, false, &first), 0) << "first at " << first;
}

TEST(CudaElementwiseMath, GeluTanhIsTheCpuGeluOnEveryBf16Input) {
  float first = 0;
  EXPECT_EQ(mismatches_over_bf16(cuda::elem::gelu_tanh_f32, gelu_tanh, true, &first), 0) << "first at " << first;
}

TEST(CudaElementwiseMath, GeluErfIsTheCpuGeluOnEveryBf16Input) {
  float first = 0;
  EXPECT_EQ(mismatches_over_bf16(cuda::elem::gelu_erf_f32, gelu_erf, true, &first), 0) << "first at " << first;
}

TEST(CudaElementwiseMath, ExpIsCorrectlyRoundedWhereItMatters) {
  // exp's overflow, underflow and the exact point exp(0) = 1.
  EXPECT_EQ(cuda::elem::exp_f32(0.0f), 1.0f);
  EXPECT_EQ(cuda::elem::exp_f32(100.0f), INFINITY);
  EXPECT_EQ(cuda::elem::exp_f32(-200.0f), 0.0f);
  EXPECT_EQ(cuda::elem::silu_f32(-200.0f), -0.0f);
  EXPECT_TRUE(std::isnan(cuda::elem::silu_f32(NAN)));
}

}  // namespace
}  // namespace fp4serve::kernels
