// Element-wise math of the CUDA kernels, written once for host and device so that the CPU test suite
// checks it against the CPU twins (kernels/activation.h) without a GPU (tests/unit/kernels/
// cuda_elementwise_math_test.cpp). Header-only; g++ sees plain inline functions.
//
// The CPU ops call glibc's float functions (expf, tanhf, erff). CUDA's float versions are off by up
// to 2 ulp. exp is glibc's own algorithm step by step (glibc_expf.h: exact for every float); tanh
// and erf are computed in double and rounded once to float: the correctly rounded result, which is
// glibc's wherever glibc's is (for every bf16 input of these formulas the CPU test finds no
// difference after the op's bf16 rounding). Operation order and the float
// roundings between steps are the CPU formulas' own; nvcc runs with --fmad=false and g++ with
// -ffp-contract=off, so nothing is fused on either side.
#pragma once

#include <cmath>

#include "kernels/cuda/glibc_expf.h"

// Host-and-device functions (plain inline functions for g++).
#if defined(__CUDACC__)
#define FP4SERVE_ELEMENTWISE_HD __host__ __device__ __forceinline__
#else
#define FP4SERVE_ELEMENTWISE_HD inline
#endif

// A nested namespace: helpers of the element-wise, norm and RoPE files, apart from other ops' names.
namespace fp4serve::kernels::cuda::elem {

FP4SERVE_ELEMENTWISE_HD float exp_f32(float x) { return glibc::exp_f32(x); }

// activation.h's silu: x / (1 + exp(-x)).
FP4SERVE_ELEMENTWISE_HD float silu_f32(float x) { return x / (1.0f + exp_f32(-x)); }

// activation.h's gelu_tanh (torch's approximate="tanh"): 0.5 * x * (1 + tanh(beta * (x + kappa x^3))).
FP4SERVE_ELEMENTWISE_HD float gelu_tanh_f32(float x) {
  const float kBeta = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5), kKappa = 0.044715f;
  const float inner = kBeta * (x + kKappa * (x * x * x));
  return 0.5f * x * (1.0f + static_cast<float>(::tanh(static_cast<double>(inner))));
}

// activation.h's gelu_erf (nn.GELU()): x * 0.5 * (1 + erf(x / sqrt(2))).
FP4SERVE_ELEMENTWISE_HD float gelu_erf_f32(float x) {
  const float e = static_cast<float>(::erf(static_cast<double>(x * static_cast<float>(M_SQRT1_2))));
  return x * 0.5f * (1.0f + e);
}

}  // namespace fp4serve::kernels::cuda::elem
