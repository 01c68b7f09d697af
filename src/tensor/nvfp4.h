// NVIDIA ModelOpt NVFP4 weights: E2M1 values packed two per byte along K (element 2j in the low
// nibble of byte j), one E4M3 block scale per 16 consecutive K elements of a row, and one fp32
// per-tensor scale (`weight_scale_2`, a forward multiplier = amax / (6 * 448)).
//   W[n,k] = e2m1(nibble(n,k)) * e4m3(weight_scale[n, k/16]) * weight_scale_2
// docs/quant-formats.md §1.2-1.3.
#pragma once

#include <cstdint>
#include <vector>

namespace fp4serve {

inline constexpr int kNvfp4BlockSize = 16;

struct Nvfp4Weight {
  int64_t rows = 0;                  // N (out features)
  int64_t cols = 0;                  // K (in features), a multiple of 16
  std::vector<uint8_t> packed;       // [N, K/2]
  std::vector<uint8_t> block_scales; // [N, K/16] float8_e4m3fn
  float global_scale = 0.0f;         // weight_scale_2
};

// Quantizes with ModelOpt's dynamic "max" recipe (get_weights_scaling_factor_2, clamped e4m3 block
// scales in [2^-9, 448], RNE e2m1 cast), so that synth checkpoints look like real exports.
Nvfp4Weight nvfp4_quantize(const float* w, int64_t rows, int64_t cols);

// Dequantizes rows [0, rows) to fp32, exactly as ModelOpt's NVFP4QTensor.dequantize in fp32.
void nvfp4_dequantize(const uint8_t* packed, const uint8_t* block_scales, float global_scale,
                      int64_t rows, int64_t cols, float* out);

}  // namespace fp4serve
