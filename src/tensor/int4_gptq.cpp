#include "tensor/int4_gptq.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "tensor/float_formats.h"

namespace fp4serve {

Int4GptqWeight int4_gptq_quantize(const float* w, int64_t rows, int64_t cols, int64_t group_size) {
  if (group_size <= 0 || cols % group_size != 0 || cols % 8 != 0 || rows % 8 != 0) {
    throw std::invalid_argument("int4_gptq_quantize: K must be a multiple of the group size and of 8, N of 8");
  }
  Int4GptqWeight q;
  q.rows = rows;
  q.cols = cols;
  q.group_size = group_size;
  const int64_t groups = cols / group_size;
  q.qweight.assign(static_cast<size_t>(cols / 8 * rows), 0);
  q.qzeros.assign(static_cast<size_t>(groups * rows / 8), static_cast<int32_t>(0x77777777));
  q.scales.resize(static_cast<size_t>(groups * rows));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t n = 0; n < rows; ++n) {
      float amax = 0.0f;
      for (int64_t k = g * group_size; k < (g + 1) * group_size; ++k) amax = std::max(amax, std::fabs(w[n * cols + k]));
      float scale = amax > 0.0f ? 2.0f * amax / 15.0f : 1.0f;
      const uint16_t scale_h = f32_to_f16(scale);
      q.scales[g * rows + n] = scale_h;
      scale = f16_to_f32(scale_h);
      for (int64_t k = g * group_size; k < (g + 1) * group_size; ++k) {
        const float v = std::nearbyint(w[n * cols + k] / scale) + 8.0f;
        const uint32_t code = static_cast<uint32_t>(std::clamp(v, 0.0f, 15.0f));
        auto& word = q.qweight[(k / 8) * rows + n];
        word = static_cast<int32_t>(static_cast<uint32_t>(word) | (code << (4 * (k % 8))));
      }
    }
  }
  return q;
}

void int4_gptq_dequantize(const int32_t* qweight, const uint16_t* scales_f16, int64_t rows, int64_t cols,
                          int64_t group_size, float* out) {
  for (int64_t k = 0; k < cols; ++k) {
    for (int64_t n = 0; n < rows; ++n) {
      const uint32_t word = static_cast<uint32_t>(qweight[(k / 8) * rows + n]);
      const int code = static_cast<int>((word >> (4 * (k % 8))) & 0xF);
      out[n * cols + k] = static_cast<float>(code - 8) * f16_to_f32(scales_f16[(k / group_size) * rows + n]);
    }
  }
}

bool int4_gptq_zeros_are_symmetric(const int32_t* qzeros, int64_t count) {
  if (count == 0) return true;
  const uint32_t first = static_cast<uint32_t>(qzeros[0]);
  if (first != 0x77777777u && first != 0x88888888u) return false;
  for (int64_t i = 1; i < count; ++i)
    if (static_cast<uint32_t>(qzeros[i]) != first) return false;
  return true;
}

}  // namespace fp4serve
