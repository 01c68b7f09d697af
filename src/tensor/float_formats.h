// Exact conversions between fp32 and the narrow float formats the checkpoints use.
//
// Decoding is exact (every narrow value is representable in fp32). Encoding rounds to nearest,
// ties to even, and saturates to the largest finite value ("satfinite", what vLLM's kernels and
// ModelOpt's clamped casts do); NaN encodes to the format's NaN (E2M1 has none: NaN -> +0 is never
// asked for, callers clamp first).
#pragma once

#include <cstdint>
#include <cstring>

namespace fp4serve {

// bfloat16: the top half of an fp32. Inline: the CPU kernels use these in their inner loops.
inline float bf16_to_f32(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// RNE on the 16 dropped bits (overflow carries into the exponent, up to Inf, as torch does);
// NaN stays NaN, keeps its sign and is made quiet.
inline uint16_t f32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE half.
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float x);  // RNE; overflow to Inf as IEEE does

// OCP float8 e4m3fn (bias 7, max 448, NaN 0x7F/0xFF, no Inf).
float e4m3_to_f32(uint8_t bits);
uint8_t f32_to_e4m3(float x);  // RNE, saturating to +-448

// OCP float8 e5m2 (bias 15, max 57344, Inf 0x7C/0xFC).
float e5m2_to_f32(uint8_t bits);
uint8_t f32_to_e5m2(float x);  // RNE, saturating to +-57344 (Inf input -> max finite)

// FP4 E2M1 nibble (bit 3 sign, bits 2..0 magnitude index into {0,0.5,1,1.5,2,3,4,6}).
float e2m1_to_f32(uint8_t nibble);
// RNE with ties to the even code, saturating to +-6; a negative input keeps its sign bit even when
// it rounds to zero (nibble 8), as ModelOpt's _cast_fp4 does.
uint8_t f32_to_e2m1(float x);

// Lookup tables for hot loops: 256 decoded fp8 values and 16 decoded e2m1 values.
const float* e4m3_table();
const float* e5m2_table();
const float* e2m1_table();

}  // namespace fp4serve
