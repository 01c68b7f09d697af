#include "tensor/nvfp4.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tensor/float_formats.h"

namespace fp4serve {

Nvfp4Weight nvfp4_quantize(const float* w, int64_t rows, int64_t cols) {
  if (cols % kNvfp4BlockSize != 0) {
    throw std::invalid_argument("nvfp4_quantize: K must be a multiple of 16");
  }
  Nvfp4Weight q;
  q.rows = rows;
  q.cols = cols;
  q.packed.resize(static_cast<size_t>(rows * cols / 2));
  q.block_scales.resize(static_cast<size_t>(rows * cols / kNvfp4BlockSize));
  float amax = 0.0f;
  for (int64_t i = 0; i < rows * cols; ++i) amax = std::max(amax, std::fabs(w[i]));
  // ModelOpt: weight_scale_2 = amax / (6 * 448), computed in fp32.
  const float s2 = amax / (6.0f * 448.0f);
  q.global_scale = s2;
  const int64_t blocks_per_row = cols / kNvfp4BlockSize;
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const float* blk = w + n * cols + b * kNvfp4BlockSize;
      float bmax = 0.0f;
      for (int i = 0; i < kNvfp4BlockSize; ++i) bmax = std::max(bmax, std::fabs(blk[i]));
      float scale = (s2 > 0.0f) ? bmax / (6.0f * s2) : 0.0f;
      if (scale == 0.0f) scale = 1.0f;  // ModelOpt replaces an all-zero block's scale by 1
      scale = std::clamp(scale, 0.001953125f, 448.0f);
      const uint8_t scale_code = f32_to_e4m3(scale);
      q.block_scales[n * blocks_per_row + b] = scale_code;
      const float step = e4m3_to_f32(scale_code) * s2;
      for (int i = 0; i < kNvfp4BlockSize; i += 2) {
        const uint8_t lo = f32_to_e2m1(step > 0.0f ? blk[i] / step : 0.0f);
        const uint8_t hi = f32_to_e2m1(step > 0.0f ? blk[i + 1] / step : 0.0f);
        q.packed[(n * cols + b * kNvfp4BlockSize + i) / 2] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
  return q;
}

void nvfp4_dequantize(const uint8_t* packed, const uint8_t* block_scales, float global_scale,
                      int64_t rows, int64_t cols, float* out) {
  const float* e2m1 = e2m1_table();
  const float* e4m3 = e4m3_table();
  const int64_t blocks_per_row = cols / kNvfp4BlockSize;
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < cols; k += 2) {
      const uint8_t byte = packed[(n * cols + k) / 2];
      const float scale = e4m3[block_scales[n * blocks_per_row + k / kNvfp4BlockSize]] * global_scale;
      out[n * cols + k] = e2m1[byte & 0xF] * scale;
      out[n * cols + k + 1] = e2m1[byte >> 4] * scale;
    }
  }
}

}  // namespace fp4serve
