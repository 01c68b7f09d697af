// glibc's expf, operation for operation, as a __host__ __device__ function: the CUDA kernels whose
// CPU twin calls std::exp on a float (the MoE router's softmax and SwiGLU, sampling's weights, the
// GDN gating and decays) use it to reproduce the CPU's floats bit for bit. Compiles with g++ (no
// CUDA headers needed) and with nvcc; tested against glibc in tests/unit/kernels/cuda_moe_route_test.cpp.
//
// The CPU's silu/sigmoid/softmax call glibc's expf (std::exp on a float). That is not
// correctly rounded: it evaluates 2^(k/32) * p(r) in double and rounds once to float, and for ~1e-4
// of the inputs that lands one ulp off the exact result (exp(-0.1005859375) for one). CUDA's expf
// differs further (up to 2 ulp), and even exp() in double rounded to float is the correctly rounded
// value, not glibc's. So exp_f32 below evaluates glibc's own algorithm in the same double
// operations [glibc: sysdeps/ieee754/flt-32/e_expf.c].
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/float_bits.h"

#if defined(__CUDACC__)
#define FP4_GLIBC_HD __host__ __device__ __forceinline__
#else
#define FP4_GLIBC_HD inline
#endif

namespace fp4serve::kernels::cuda::glibc {

using bits::bits_f32;
using bits::bits_f64;
using bits::f32_bits;
using bits::f64_bits;

// 2^(i/32) as doubles (correctly rounded), each less i << 47 so that adding k << 47 for k = 32q + i
// gives 2^(k/32) (the exponent field absorbs q).
#define FP4_GLIBC_EXP2_TABLE                                                                  \
  0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull, \
      0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull, \
      0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull, \
      0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull, \
      0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull, \
      0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull, \
      0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull, \
      0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull
#if defined(__CUDACC__)
static __constant__ uint64_t kExp2TableDevice[32] = {FP4_GLIBC_EXP2_TABLE};
#endif
inline constexpr uint64_t kExp2TableHost[32] = {FP4_GLIBC_EXP2_TABLE};
#undef FP4_GLIBC_EXP2_TABLE

FP4_GLIBC_HD uint64_t exp2_table(uint32_t i) {
#if defined(__CUDA_ARCH__)
  return kExp2TableDevice[i];
#else
  return kExp2TableHost[i];
#endif
}

// glibc's expf, operation for operation: x * 32/ln2 = k + r (k rounded to nearest by the 1.5 * 2^52
// shift), exp(x) = 2^(k/32) * (1 + C2 r + C1 r^2 + C0 r^3) in double, rounded once to float.
// (glibc's x86-64 build picks an FMA variant on FMA machines; its floats are the same as this
// unfused form's over a sweep of every third float in [-104, 88], see cuda_moe_route_test.cpp.)
FP4_GLIBC_HD float exp_f32(float x) {
  constexpr double kInvLn2N = 0x1.71547652b82fep+0 * 32, kShift = 0x1.8p+52;
  constexpr double kC0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32, kC1 = 0x1.ebfce50fac4f3p-3 / 32 / 32,
                   kC2 = 0x1.62e42ff0c52d6p-1 / 32;
  const uint32_t abstop = (f32_bits(x) >> 20) & 0x7FFu;
  if (abstop >= ((f32_bits(88.0f) >> 20) & 0x7FFu)) {  // |x| >= 88, Inf or NaN
    if (f32_bits(x) == f32_bits(-INFINITY)) return 0.0f;
    if (abstop >= ((f32_bits(INFINITY) >> 20) & 0x7FFu)) return x + x;  // NaN, +Inf
    if (x > 0x1.62e42ep6f) return INFINITY;                           // overflow
    if (x < -0x1.9fe368p6f) return 0.0f;                              // underflow
  }
  const double z = kInvLn2N * static_cast<double>(x);
  double kd = z + kShift;
  const uint64_t ki = f64_bits(kd);
  kd -= kShift;
  const double r = z - kd;
  const double s = bits_f64(exp2_table(static_cast<uint32_t>(ki % 32)) + (ki << 47));
  const double p = kC0 * r + kC1;
  const double r2 = r * r;
  double y = kC2 * r + 1.0;
  y = p * r2 + y;
  return static_cast<float>(y * s);
}

}  // namespace fp4serve::kernels::cuda::glibc
