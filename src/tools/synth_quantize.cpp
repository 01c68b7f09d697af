#include "tools/synth_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/float_formats.h"

namespace fp4serve::synth {
namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

constexpr uint32_t kE4M3MaxBits = 0x43E00000u;    // 448.0f
constexpr uint32_t kE4M3MinNormal = 0x3C800000u;  // 2^-6
constexpr int kFp8Block = 128;

}  // namespace

uint8_t fast_e4m3(float x) {
  const uint32_t u = bits_of(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;                   // NaN
  if (a >= kE4M3MaxBits) return sign | 0x7E;          // >= 448 (and Inf) saturate to 448
  if (a < kE4M3MinNormal) {                           // subnormal range: multiples of 2^-9
    const float q = std::nearbyint(float_of(a) * 512.0f);  // exact scaling, RNE
    return sign | static_cast<uint8_t>(q);           // 0..8 (8 is the smallest normal, 2^-6)
  }
  // Round the fp32 mantissa to 3 bits, ties to even; a carry moves into the exponent by itself.
  a += 0x7FFFFu + ((a >> 20) & 1u);
  uint32_t code = (a >> 20) - ((127u - 7u) << 3);
  if (code > 0x7Eu) code = 0x7E;
  return sign | static_cast<uint8_t>(code);
}

uint8_t fast_e2m1(float x) {
  const uint8_t sign = x < 0.0f ? 0x8 : 0x0;
  const float a = std::fabs(x);
  // Decision points of RNE on {0, .5, 1, 1.5, 2, 3, 4, 6}: a tie goes to the even code, so the
  // midpoints next to an even code below (0.25, 1.25, 2.5, 5) round down and the others up.
  // NaN compares false everywhere and encodes as 0, as the reference does.
  const int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return sign | static_cast<uint8_t>(m);
}

float abs_max(const float* w, int64_t n) {
  // Eight independent maxima so that the loop pipelines (and vectorizes); max is exact, so the
  // order does not matter.
  float m[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const float a = std::fabs(w[i + j]);
      m[j] = m[j] < a ? a : m[j];
    }
  }
  for (; i < n; ++i) {
    const float a = std::fabs(w[i]);
    m[0] = m[0] < a ? a : m[0];
  }
  float r = 0.0f;
  for (float x : m) r = r < x ? x : r;
  return r;
}

namespace {

inline float block16_abs_max(const float* w) {
  float m[8];
  for (int j = 0; j < 8; ++j) m[j] = std::max(std::fabs(w[j]), std::fabs(w[j + 8]));
  for (int j = 0; j < 4; ++j) m[j] = std::max(m[j], m[j + 4]);
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

}  // namespace

float nvfp4_global_scale(float amax) { return amax / (6.0f * 448.0f); }

void nvfp4_encode_row(const float* w, int64_t cols, float s2, uint8_t* packed, uint8_t* block_scales) {
  const float* e4m3 = e4m3_table();
  for (int64_t b = 0; b < cols / 16; ++b) {
    const float* blk = w + b * 16;
    const float bmax = block16_abs_max(blk);
    // The same fp32 operations, in the same order, as nvfp4_quantize.
    float scale = (s2 > 0.0f) ? bmax / (6.0f * s2) : 0.0f;
    if (scale == 0.0f) scale = 1.0f;
    scale = std::clamp(scale, 0.001953125f, 448.0f);
    const uint8_t code = fast_e4m3(scale);
    if (block_scales) block_scales[b] = code;
    if (!packed) continue;
    const float step = e4m3[code] * s2;
    uint8_t* out = packed + b * 8;
    if (step > 0.0f) {
      for (int i = 0; i < 16; i += 2) {
        out[i / 2] = static_cast<uint8_t>(fast_e2m1(blk[i] / step) | (fast_e2m1(blk[i + 1] / step) << 4));
      }
    } else {
      std::memset(out, 0, 8);
    }
  }
}

float fp8_tensor_scale(float amax) { return amax > 0.0f ? amax / 448.0f : 1.0f; }

void fp8_encode_row(const float* w, int64_t n, float scale, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = fast_e4m3(w[i] / scale);
}

void fp8_block_encode_band(const float* w, int64_t rows, int64_t cols, ScaleRounding scale_of_block,
                           uint8_t* data, float* scales) {
  const int64_t blocks = (cols + kFp8Block - 1) / kFp8Block;
  for (int64_t j = 0; j < blocks; ++j) {
    const int64_t c0 = j * kFp8Block, c1 = std::min(cols, c0 + kFp8Block);
    float amax = 0.0f;
    for (int64_t r = 0; r < rows; ++r) amax = std::max(amax, abs_max(w + r * cols + c0, c1 - c0));
    float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
    if (scale_of_block) scale = scale_of_block(scale);
    scales[j] = scale;
    if (!data) continue;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = c0; c < c1; ++c) data[r * cols + c] = fast_e4m3(w[r * cols + c] / scale);
    }
  }
}

void int4_gptq_encode(const float* w, int64_t rows, int64_t cols, int64_t group_size, int32_t* qweight,
                      uint16_t* scales) {
  const int64_t groups = cols / group_size;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < rows; ++n) {
    const float* row = w + n * cols;
    for (int64_t g = 0; g < groups; ++g) {
      const float* grp = row + g * group_size;
      const float amax = abs_max(grp, group_size);
      // int4_gptq_quantize's steps: fp32 scale, rounded through f16, values divided by the f16 one.
      const uint16_t scale_h = f32_to_f16(amax > 0.0f ? 2.0f * amax / 15.0f : 1.0f);
      scales[g * rows + n] = scale_h;
      const float scale = f16_to_f32(scale_h);
      for (int64_t k8 = 0; k8 < group_size; k8 += 8) {
        uint32_t word = 0;
        for (int j = 0; j < 8; ++j) {
          const float v = std::nearbyint(grp[k8 + j] / scale) + 8.0f;
          word |= static_cast<uint32_t>(std::clamp(v, 0.0f, 15.0f)) << (4 * j);
        }
        qweight[((g * group_size + k8) / 8) * rows + n] = static_cast<int32_t>(word);
      }
    }
  }
}

}  // namespace fp4serve::synth
