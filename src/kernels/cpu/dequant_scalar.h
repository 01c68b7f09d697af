// Reference dequantization of 32 consecutive K-elements of one weight row: the unit of the
// canonical dot product (linear.h). Baseline code, callable from every ISA variant (they use it
// for K tails and for layouts they do not vectorize).
#pragma once

#include <cstdint>

#include "kernels/weights.h"

namespace fp4serve::kernels::cpu {

// out[j] = W(n, k0 + j) for j < 32 (0 beyond K), tensor_scale NOT applied (weights.h).
void dequant_chunk32(const WeightView& w, int64_t n, int64_t k0, float out[32]);

// 256 x 16 fp32 table: row s holds e2m1(nibble) * e4m3(s) for nibbles 0..15 (exact products), so a
// vector kernel turns nibbles into dequantized NVFP4 weights with one permute. 64-byte aligned.
const float* nvfp4_product_lut();

}  // namespace fp4serve::kernels::cpu
