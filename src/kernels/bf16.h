// bf16 rounding helpers for the CPU kernels. bf16 values travel as uint16_t bits; "a float holding
// a bf16 value" is an fp32 whose low 16 bits are zero. These match tensor/float_formats.h
// (f32_to_bf16: round to nearest even, NaN stays a quiet NaN) but are inline for hot loops.
#pragma once

#include <cstdint>
#include <cstring>

namespace fp4serve::kernels {

inline float bf16_bits_to_f32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// x rounded to the nearest bf16 value, returned as fp32 (what `tensor.to(bfloat16)` then back does).
inline float round_bf16(float x) { return bf16_bits_to_f32(f32_to_bf16_bits(x)); }

void bf16_to_f32(const uint16_t* in, float* out, int64_t n);
void f32_to_bf16(const float* in, uint16_t* out, int64_t n);
// In place: every element rounded to bf16 (values stay fp32).
void round_bf16_inplace(float* x, int64_t n);

}  // namespace fp4serve::kernels
