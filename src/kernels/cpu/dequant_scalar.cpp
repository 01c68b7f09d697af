#include "kernels/cpu/dequant_scalar.h"

#include "kernels/bf16.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels::cpu {

void dequant_chunk32(const WeightView& w, int64_t n, int64_t k0, float out[32]) {
  const int64_t kend = k0 + 32 < w.k ? k0 + 32 : w.k;
  const float* e4m3 = e4m3_table();
  const float* e2m1 = e2m1_table();
  int j = 0;
  for (int64_t k = k0; k < kend; ++k, ++j) {
    float v = 0.0f;
    switch (w.format) {
      case WeightLayout::kBf16:
        v = bf16_bits_to_f32(static_cast<const uint16_t*>(w.data)[n * w.ld + k]);
        break;
      case WeightLayout::kFp8Tensor:
        v = e4m3[static_cast<const uint8_t*>(w.data)[n * w.ld + k]];
        break;
      case WeightLayout::kFp8Block: {
        const int64_t si = (n / 128) * w.scale_ld + k / 128;
        const float s = w.scales_bf16 ? bf16_bits_to_f32(static_cast<const uint16_t*>(w.scales)[si])
                                      : static_cast<const float*>(w.scales)[si];
        v = e4m3[static_cast<const uint8_t*>(w.data)[n * w.ld + k]] * s;
        break;
      }
      case WeightLayout::kNvfp4: {
        const uint8_t byte = static_cast<const uint8_t*>(w.data)[n * (w.ld / 2) + k / 2];
        const uint8_t nib = (k & 1) ? (byte >> 4) : (byte & 0xF);
        const float s = e4m3[static_cast<const uint8_t*>(w.scales)[n * w.scale_ld + k / 16]];
        v = e2m1[nib] * s;
        break;
      }
      case WeightLayout::kInt4Gptq: {
        const uint32_t word = static_cast<uint32_t>(static_cast<const int32_t*>(w.data)[(k / 8) * w.ld + n]);
        const int q = static_cast<int>((word >> (4 * (k % 8))) & 0xF);
        const float s = f16_to_f32(static_cast<const uint16_t*>(w.scales)[(k / w.group) * w.scale_ld + n]);
        v = static_cast<float>(q - 8) * s;
        break;
      }
      case WeightLayout::kInt4Packed: {
        const uint8_t byte = static_cast<const uint8_t*>(w.data)[n * (w.ld / 2) + k / 2];
        const int q = (k & 1) ? (byte >> 4) : (byte & 0xF);
        const float s = static_cast<const float*>(w.scales)[n * w.scale_ld + k / w.group];
        v = static_cast<float>(q - 8) * s;
        break;
      }
    }
    out[j] = v;
  }
  for (; j < 32; ++j) out[j] = 0.0f;
}

const float* nvfp4_product_lut() {
  struct Table {
    alignas(64) float v[256 * 16];
    Table() {
      for (int s = 0; s < 256; ++s)
        for (int n = 0; n < 16; ++n) v[s * 16 + n] = e2m1_table()[n] * e4m3_table()[s];
    }
  };
  static const Table t;
  return t.v;
}

}  // namespace fp4serve::kernels::cpu
