// Scalar math of the Gated DeltaNet kernels, written to give the CPU op's bits (cpu/gdn_cpu.cpp,
// activation.h, tensor/float_formats.h). Host-and-device: the kernels' per-thread bodies
// (gdn_device.cuh) also compile with g++, so a CPU test can run them against the CPU op
// (tests/unit/kernels/cuda_gdn_test.cpp).
//   - bf16 <-> fp32 exactly as f32_to_bf16 / bf16_to_f32 (round to nearest even; a NaN keeps its sign
//     and top payload bits and is made quiet with 0x0040, as the host does);
//   - on the device exp/log1p run in double and are rounded once to fp32: the CPU calls glibc's
//     expf/log1pf, correctly rounded in practice, while CUDA's expf is off by up to 2 ulp (on the host
//     the functions are the CPU op's own);
//   - every add, mul, div and sqrt through the _rn intrinsics on the device, so no contraction or
//     approximation can change an operation (nvcc also runs with --fmad=false); an fma only where the
//     CPU calls std::fma.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/float_bits.h"
#include "kernels/cuda/glibc_expf.h"

#if defined(__CUDACC__)
#define GDN_HD __host__ __device__ __forceinline__
#else
#define GDN_HD inline
#endif

namespace fp4serve::kernels::cuda::gdn_math {

GDN_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
GDN_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
GDN_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
GDN_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
GDN_HD float sqrt_f32(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}
GDN_HD float fma_f32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return fmaf(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
// glibc's expf(x) (glibc_expf.h: its algorithm step by step, since (float)exp((double)x) differs
// from it on ~1e-4 of float inputs), log1pf(x).
GDN_HD float exp_f32(float x) {
#if defined(__CUDA_ARCH__)
  return glibc::exp_f32(x);
#else
  return std::exp(x);
#endif
}
GDN_HD float log1p_f32(float x) {
#if defined(__CUDA_ARCH__)
  return static_cast<float>(log1p(static_cast<double>(x)));
#else
  return std::log1p(x);
#endif
}

// Bit casts and tensor/float_formats.h's bf16 rounding (float_bits.h).
GDN_HD uint32_t bits_of(float x) { return bits::f32_bits(x); }
GDN_HD float float_of(uint32_t u) { return bits::bits_f32(u); }
GDN_HD float bf16_to_f32(uint16_t b) { return bits::bf16_value(b); }
GDN_HD uint16_t f32_to_bf16(float x) { return bits::bf16_bits(x); }
GDN_HD float round_bf16(float x) { return bits::round_bf16(x); }

// activation.h: silu(x) = x / (1 + exp(-x)); sigmoid(x) = 1 / (1 + exp(-x));
// softplus(x) = x > 20 ? x : log1p(exp(x)) (torch's threshold 20).
GDN_HD float silu(float x) { return div_rn(x, add_rn(1.0f, exp_f32(-x))); }
GDN_HD float sigmoid(float x) { return div_rn(1.0f, add_rn(1.0f, exp_f32(-x))); }
GDN_HD float softplus(float x) { return x > 20.0f ? x : log1p_f32(exp_f32(x)); }

}  // namespace fp4serve::kernels::cuda::gdn_math
