#include "tensor/fp8_block.h"

#include <algorithm>
#include <cmath>

#include "tensor/float_formats.h"

namespace fp4serve {
namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

Fp8BlockWeight fp8_block_quantize(const float* w, int64_t rows, int64_t cols) {
  Fp8BlockWeight q;
  q.rows = rows;
  q.cols = cols;
  q.data.resize(static_cast<size_t>(rows * cols));
  const int64_t br = ceil_div(rows, kFp8BlockSize), bc = ceil_div(cols, kFp8BlockSize);
  q.scale_inv.assign(static_cast<size_t>(br * bc), 1.0f);
  for (int64_t i = 0; i < br; ++i) {
    for (int64_t j = 0; j < bc; ++j) {
      const int64_t r1 = std::min(rows, (i + 1) * kFp8BlockSize);
      const int64_t c1 = std::min(cols, (j + 1) * kFp8BlockSize);
      float amax = 0.0f;
      for (int64_t r = i * kFp8BlockSize; r < r1; ++r)
        for (int64_t c = j * kFp8BlockSize; c < c1; ++c) amax = std::max(amax, std::fabs(w[r * cols + c]));
      const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      q.scale_inv[i * bc + j] = scale;
      for (int64_t r = i * kFp8BlockSize; r < r1; ++r)
        for (int64_t c = j * kFp8BlockSize; c < c1; ++c) q.data[r * cols + c] = f32_to_e4m3(w[r * cols + c] / scale);
    }
  }
  return q;
}

void fp8_block_dequantize(const uint8_t* data, const float* scale_inv, int64_t rows, int64_t cols,
                          float* out) {
  const float* lut = e4m3_table();
  const int64_t bc = ceil_div(cols, kFp8BlockSize);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = lut[data[r * cols + c]] * scale_inv[(r / kFp8BlockSize) * bc + c / kFp8BlockSize];
}

void fp8_tensor_dequantize(const uint8_t* data, float scale, int64_t count, float* out) {
  const float* lut = e4m3_table();
  for (int64_t i = 0; i < count; ++i) out[i] = lut[data[i]] * scale;
}

}  // namespace fp4serve
