// The scalar conversions of attention on CUDA, written once for the host and the device so that the
// CPU tests (tests/unit/kernels/cuda_attention_plan_test.cpp) check the very code the kernels run
// against the CPU op's conversions (tensor/float_formats.h):
//   bf16 rounding    f32_to_bf16: round to nearest even, a NaN keeps its upper bits and is quieted;
//   e4m3 decode      e4m3fn: S.EEEE.MMM, bias 7, S.1111.111 is NaN, no Inf;
//   e4m3 encode      f32_to_e4m3: round to nearest even, saturating to +-448, NaN -> 0x7F, the sign
//                    kept on a value that rounds to zero, Inf -> +-448.
// Every step is exact integer or power-of-two arithmetic, so host and device give the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/float_bits.h"

#if defined(__CUDACC__)
#define FP4_HD __host__ __device__ __forceinline__
#else
#define FP4_HD inline
#endif

namespace fp4serve::kernels::cuda::attn {

using bits::bits_f32;
using bits::f32_bits;
using bits::round_bf16;
// tensor/float_formats.h's f32_to_bf16 and its inverse (float_bits.h).
FP4_HD uint16_t f32_to_bf16_bits(float x) { return bits::bf16_bits(x); }
FP4_HD float bf16_bits_to_f32(uint16_t b) { return bits::bf16_value(b); }

// The value of an e4m3fn code (the CPU's e4m3_table()).
FP4_HD float e4m3_to_f32(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t e = (code >> 3) & 0xFu, m = code & 0x7u;
  if ((code & 0x7Fu) == 0x7Fu) return bits_f32(0x7FC00000u);  // NaN: the table's quiet_NaN, either sign
  if (e == 0) {  // subnormal: m * 2^-9, exact in fp32
    const float mag = static_cast<float>(m) * 0.001953125f;
    return sign ? -mag : mag;
  }
  return bits_f32(sign | ((e + 120u) << 23) | (m << 20));  // 2^(e-7) * 1.m
}

// f32_to_e4m3 of tensor/float_formats.cpp (encode_magnitude with 3 mantissa bits, bias 7), in
// integer form: the magnitude's quantum is 2^(exp-3) with exp = max(floor(log2 |x|), -6).
FP4_HD uint8_t f32_to_e4m3(float x) {
  const uint32_t u = f32_bits(x);
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7F;  // NaN (the CPU drops the sign)
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  if (mag >= 0x43E00000u) return sign | 0x7E;  // |x| >= 448 (Inf included) saturates
  if (mag == 0) return sign;
  // |x| = 1.f * 2^e (normal fp32; fp32 subnormals are far below e4m3's range and round to 0).
  const int e = static_cast<int>(mag >> 23) - 127;
  if (e < -127 + 1) return sign;  // fp32 subnormal
  const int exp = e < -6 ? -6 : e;
  // q = |x| / 2^(exp-3): 24-bit significand shifted right by (exp - 3) - (e - 23) = exp - e + 20 bits.
  const uint32_t sig = (mag & 0x7FFFFFu) | 0x800000u;
  const int shift = exp - e + 20;  // >= 20
  if (shift > 31) return sign;     // below half the smallest subnormal: rounds to 0
  const uint32_t q = sig >> shift, rest = sig & ((1u << shift) - 1u), half = 1u << (shift - 1);
  uint32_t r = q + ((rest > half || (rest == half && (q & 1u))) ? 1u : 0u);  // ties to even
  if (r == 0) return sign;
  int field = exp + 7;  // exponent field when r is normal (8 <= r < 16)
  if (r >= 16) {        // rounded up into the next binade
    r >>= 1;
    field += 1;
  }
  uint32_t code;
  if (r < 8) {
    code = r;  // subnormal (exp == -6): field 0, mantissa r
  } else {
    code = (static_cast<uint32_t>(field) << 3) | (r - 8);
  }
  if (code > 0x7E) code = 0x7E;  // above 448 after rounding: saturate
  return static_cast<uint8_t>(sign | code);
}

}  // namespace fp4serve::kernels::cuda::attn
