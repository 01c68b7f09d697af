// RoPE's cos/sin for the CUDA kernels, written once for host and device so that the CPU test suite
// checks them against the CPU's rope_cos_sin (kernels/rope.h) bit for bit without a GPU
// (tests/unit/kernels/cuda_rope_math_test.cpp).
//
// The CPU computes cos/sin of an fp32 angle with glibc's cosf/sinf and rounds to bf16. CUDA's
// cosf/sinf are not correctly rounded, and its double cos/sin carry a Payne-Hanek slow path whose
// local array is a stack frame (the resource check forbids them). So the angle is reduced here by
// hand (Cody-Waite, pi/2 in two parts: exact for every angle below 2^20 * pi/2, far above the
// largest position times inv_freq <= 1 any context reaches) and the sine and cosine of the remainder
// (|r| <= pi/4) come from their Taylor series in double (terms to r^21: truncation below 1e-22);
// the result is within ~2 ulp of double, and rounded once to float it is the correctly rounded
// value, glibc's in every case the CPU test draws. Only IEEE double +, *, rint: the same bits on
// host and device (no contraction on either: --fmad=false, -ffp-contract=off).
#pragma once

#include <cmath>

#include "kernels/cuda/elementwise_math.h"  // FP4SERVE_ELEMENTWISE_HD
#include "kernels/rope.h"

// A nested namespace: helpers of the element-wise, norm and RoPE files, apart from other ops' names.
namespace fp4serve::kernels::cuda::elem {

// The largest rotary_dim / 2 the CUDA rope takes (its inv_freq table is a kernel argument).
inline constexpr int kMaxRopeHalf = 256;

// sin(x) and cos(x) of an fp32 angle, each rounded once to fp32.
FP4SERVE_ELEMENTWISE_HD void sincos_f32(float angle, float* sin_out, float* cos_out) {
  const double kTwoOverPi = 0x1.45f306dc9c883p-1;
  const double kPio2Hi = 0x1.921fb544p+0;         // pi/2 to 33 bits: k * kPio2Hi is exact for |k| < 2^20
  const double kPio2Lo = 0x1.0b4611a626331p-34;   // pi/2 - kPio2Hi
  const double x = static_cast<double>(angle);
  const double k = ::rint(x * kTwoOverPi);
  // x - k * kPio2Hi is exact (Sterbenz: both within pi/4 of each other); k == 0 keeps x's sign (-0).
  const double r = k == 0.0 ? x : (x - k * kPio2Hi) - k * kPio2Lo;
  const double r2 = r * r;
  // sin r = r + r * r2 * S(r2), cos r = 1 + r2 * C(r2): Taylor coefficients 1/n!, Horner.
  const double S =
      -1.0 / 6.0 +
      r2 * (1.0 / 120.0 +
            r2 * (-1.0 / 5040.0 +
                  r2 * (1.0 / 362880.0 +
                        r2 * (-1.0 / 39916800.0 +
                              r2 * (1.0 / 6227020800.0 +
                                    r2 * (-1.0 / 1307674368000.0 +
                                          r2 * (1.0 / 355687428096000.0 +
                                                r2 * (-1.0 / 121645100408832000.0 +
                                                      r2 * (1.0 / 51090942171709440000.0)))))))));
  const double C =
      -1.0 / 2.0 +
      r2 * (1.0 / 24.0 +
            r2 * (-1.0 / 720.0 +
                  r2 * (1.0 / 40320.0 +
                        r2 * (-1.0 / 3628800.0 +
                              r2 * (1.0 / 479001600.0 +
                                    r2 * (-1.0 / 87178291200.0 +
                                          r2 * (1.0 / 20922789888000.0 +
                                                r2 * (-1.0 / 6402373705728000.0 +
                                                      r2 * (1.0 / 2432902008176640000.0)))))))));
  const double s = r == 0.0 ? r : r + r * (r2 * S);  // sin(-0) = -0
  const double c = 1.0 + r2 * C;
  // x = r + q * pi/2: rotate by the quadrant (two's complement & 3 is k mod 4 for negative k too).
  const int q = static_cast<int>(static_cast<long long>(k) & 3);
  const double sx = q == 0 ? s : q == 1 ? c : q == 2 ? -s : -c;
  const double cx = q == 0 ? c : q == 1 ? -s : q == 2 ? -c : s;
  *sin_out = static_cast<float>(sx);
  *cos_out = static_cast<float>(cx);
}

// The M-RoPE axis of frequency i (rope.h): 0 = t, 1 = h, 2 = w.
FP4SERVE_ELEMENTWISE_HD int rope_axis(int i, int sec_h, int sec_w) {
  if (i % 3 == 1 && i < 3 * sec_h) return 1;
  if (i % 3 == 2 && i < 3 * sec_w) return 2;
  return 0;
}

// inv_freq[i] = 1 / theta^(2i / rot) for i < rot/2, in the CPU's expression (rope_cpu.cpp: fp32
// std::pow, i.e. glibc's powf), computed on the host so the device needs no pow of its own.
inline void rope_inv_freq(const RopeConfig& cfg, float* inv_freq) {
  const int half = cfg.rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(cfg.rotary_dim);
    inv_freq[i] = 1.0f / std::pow(cfg.theta, expo);
  }
}

}  // namespace fp4serve::kernels::cuda::elem
