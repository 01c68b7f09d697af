// bf16 helpers for the CPU kernels. bf16 values travel as uint16_t bits; "a float holding a bf16
// value" is an fp32 whose low 16 bits are zero. The element conversions are tensor/float_formats.h's
// (inline there); these names keep the kernels' bits-vs-array overloads apart.
#pragma once

#include <cstdint>
#include <cstring>

#include "tensor/float_formats.h"

namespace fp4serve::kernels {

inline float bf16_bits_to_f32(uint16_t b) { return fp4serve::bf16_to_f32(b); }
inline uint16_t f32_to_bf16_bits(float f) { return fp4serve::f32_to_bf16(f); }
// x rounded to the nearest bf16 value, returned as fp32 (what `tensor.to(bfloat16)` then back does).
inline float round_bf16(float x) { return bf16_bits_to_f32(f32_to_bf16_bits(x)); }

void bf16_to_f32(const uint16_t* in, float* out, int64_t n);
void f32_to_bf16(const float* in, uint16_t* out, int64_t n);
// In place: every element rounded to bf16 (values stay fp32).
void round_bf16_inplace(float* x, int64_t n);

}  // namespace fp4serve::kernels
