// Fast row-wise quantizers for `fp4serve synth`, bit-identical to the reference quantizers in
// src/tensor (nvfp4.h, fp8_block.h, int4_gptq.h) and conversions (float_formats.h) — those are
// written for clarity (frexp/ldexp per value) and run at a few million values per second; synth
// needs hundreds of millions. The encoders here replace the generic rounding by the comparisons and
// integer rounding it amounts to for each format. tests/unit/tools/synth_quantize_test.cpp checks
// them against the references on sweeps, ties and random data.
#pragma once

#include <cstdint>

namespace fp4serve::synth {

// == f32_to_e4m3(x) for every finite x and +-Inf (RNE, saturating to +-448; NaN -> 0x7F).
uint8_t fast_e4m3(float x);
// == f32_to_e2m1(x) for every x (RNE to the even code, saturating to +-6; negative keeps the sign).
uint8_t fast_e2m1(float x);

// Largest |w| of n values.
float abs_max(const float* w, int64_t n);

// NVFP4 (ModelOpt's rules, as nvfp4_quantize): the global scale from the tensor's amax, then one
// row of K values -> K/2 packed bytes and K/16 e4m3 block scales. Either output may be null.
float nvfp4_global_scale(float amax);  // weight_scale_2 = amax / (6 * 448)
void nvfp4_encode_row(const float* w, int64_t cols, float global_scale, uint8_t* packed, uint8_t* block_scales);

// Per-tensor FP8 (ModelOpt "FP8"): weight_scale = amax / 448 (1 when amax is 0); e4m3(w / scale).
float fp8_tensor_scale(float amax);
void fp8_encode_row(const float* w, int64_t n, float scale, uint8_t* out);

// Block FP8 of `rows` (<= 128) rows of one 128-row band: the dequant factor of each 128-column
// block is amax / 448 (1 for an all-zero block), as fp8_block_quantize. `scale_of_block` may round
// the factor (Qwen's release stores it as bf16) before the values are divided by it; pass null to
// keep fp32. Writes data [rows, cols] and scales [ceil(cols/128)] (the factors actually used).
using ScaleRounding = float (*)(float);
void fp8_block_encode_band(const float* w, int64_t rows, int64_t cols, ScaleRounding scale_of_block,
                           uint8_t* data, float* scales);

// INT4 GPTQ symmetric (as int4_gptq_quantize) of a whole [rows, cols] matrix: qweight [cols/8, rows]
// int32, scales [cols/g, rows] f16. qzeros are the constant 0x77777777 of a symmetric v1 checkpoint.
// Parallel over rows (OpenMP).
void int4_gptq_encode(const float* w, int64_t rows, int64_t cols, int64_t group_size, int32_t* qweight,
                      uint16_t* scales);

}  // namespace fp4serve::synth
