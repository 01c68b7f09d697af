#include "kernels/cpu/vision_cpu.h"

#include <cmath>

#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cpu/thread_pool.h"

namespace fp4serve::kernels {

void layernorm_rows(const uint16_t* x, int64_t ldx, int64_t rows, int64_t D, const float* w, const float* b, float eps,
                    uint16_t* out, int64_t ldo) {
  cpu::parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint16_t* xr = x + r * ldx;
      // Moments in double: torch's fp32 Welford/cascade sums differ from any fixed fp32 order only in
      // the last bits of mean and var, which the bf16 output hides.
      double s = 0.0;
      for (int64_t i = 0; i < D; ++i) s += bf16_bits_to_f32(xr[i]);
      const double mean_d = s / static_cast<double>(D);
      double ss = 0.0;
      for (int64_t i = 0; i < D; ++i) {
        const double d = bf16_bits_to_f32(xr[i]) - mean_d;
        ss += d * d;
      }
      const float mean = static_cast<float>(mean_d);
      const float var = static_cast<float>(ss / static_cast<double>(D));
      const float rstd = 1.0f / std::sqrt(std::max(var, 0.0f) + eps);
      const float shift = -rstd * mean;
      uint16_t* o = out + r * ldo;
      for (int64_t i = 0; i < D; ++i) {
        const float y = (bf16_bits_to_f32(xr[i]) * rstd + shift) * w[i] + b[i];
        o[i] = f32_to_bf16_bits(y);
      }
    }
  });
}

void bias_activation_rows(const float* x, int64_t ldx, int64_t rows, int64_t N, const float* bias, Activation act,
                          uint16_t* out, int64_t ldo) {
  cpu::parallel_for(rows, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * ldx;
      uint16_t* o = out + r * ldo;
      for (int64_t i = 0; i < N; ++i) {
        const float y = round_bf16(bias ? xr[i] + bias[i] : xr[i]);
        float a = y;
        if (act == Activation::kGeluTanh) a = gelu_tanh(y);
        else if (act == Activation::kGeluErf) a = gelu_erf(y);
        o[i] = f32_to_bf16_bits(a);
      }
    }
  });
}

void rope_table_rows(uint16_t* x, int64_t ldx, int64_t T, int64_t H, int64_t D, const float* cos, const float* sin) {
  const int64_t half = D / 2;
  cpu::parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    float buf[1024];
    for (int64_t t = t0; t < t1; ++t) {
      const float* c = cos + t * D;
      const float* s = sin + t * D;
      for (int64_t h = 0; h < H; ++h) {
        uint16_t* xh = x + t * ldx + h * D;
        for (int64_t i = 0; i < D; ++i) buf[i] = bf16_bits_to_f32(xh[i]);
        for (int64_t i = 0; i < D; ++i) {
          const float rot = i < half ? -buf[i + half] : buf[i - half];
          const float a = buf[i] * c[i];
          const float b = rot * s[i];
          xh[i] = f32_to_bf16_bits(a + b);
        }
      }
    }
  });
}

}  // namespace fp4serve::kernels
