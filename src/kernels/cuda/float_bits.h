// Bit casts and the CPU's bf16 rounding as __host__ __device__ functions, shared by every CUDA file
// whose arithmetic is also run on the host by the CPU test suite (the kernels' math headers:
// attention_numerics.h, gdn_math.cuh, moe_math.h, glibc_expf.h, linear_pack.h). Compiles with g++ (no
// CUDA headers needed) and with nvcc.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FP4_BITS_HD __host__ __device__ __forceinline__
#else
#define FP4_BITS_HD inline
#endif

namespace fp4serve::kernels::cuda::bits {

FP4_BITS_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

FP4_BITS_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

FP4_BITS_HD uint64_t f64_bits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
#endif
}

FP4_BITS_HD double bits_f64(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, 8);
  return d;
#endif
}

// tensor/float_formats.h's f32_to_bf16 bit for bit: round to nearest even on the 16 dropped bits,
// overflow to Inf, NaN kept with its sign and top payload bits, made quiet (__float2bfloat16_rn
// returns a canonical NaN instead).
FP4_BITS_HD uint16_t bf16_bits(float x) {
  uint32_t u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

FP4_BITS_HD float bf16_value(uint16_t b) { return bits_f32(static_cast<uint32_t>(b) << 16); }

// x rounded to bf16 and back (kernels/bf16.h's round_bf16).
FP4_BITS_HD float round_bf16(float x) { return bf16_value(bf16_bits(x)); }

}  // namespace fp4serve::kernels::cuda::bits
