// Bulk conversions between fp32 and bf16/f16 arrays (the element conversions are in float_formats.h).
#pragma once

#include <cstdint>

#include "tensor/float_formats.h"

namespace fp4serve {

void bf16_to_f32(const uint16_t* in, int64_t n, float* out);
void f32_to_bf16(const float* in, int64_t n, uint16_t* out);
void f16_to_f32(const uint16_t* in, int64_t n, float* out);

// x -> float(bf16(x)): what a bf16 tensor in the reference holds after a cast.
inline float round_to_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

}  // namespace fp4serve
