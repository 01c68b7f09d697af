#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/rope.h"
#include "kernels/cpu/rope_cpu.h"

namespace fp4serve::kernels {

void rope_cos_sin(const RopeConfig& cfg, int64_t pos_t, int64_t pos_h, int64_t pos_w, float* cos, float* sin) {
  const int half = cfg.rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(cfg.rotary_dim);
    const float inv_freq = 1.0f / std::pow(cfg.theta, expo);
    int64_t pos = pos_t;
    if (i % 3 == 1 && i < 3 * cfg.sections[1]) pos = pos_h;
    if (i % 3 == 2 && i < 3 * cfg.sections[2]) pos = pos_w;
    const float f = static_cast<float>(pos) * inv_freq;
    cos[i] = cos[i + half] = round_bf16(std::cos(f));
    sin[i] = sin[i + half] = round_bf16(std::sin(f));
  }
}

void apply_rope(uint16_t* x, int64_t T, int64_t heads, const RopeConfig& cfg, const int64_t* pos_t,
                const int64_t* pos_h, const int64_t* pos_w) {
  if (cfg.rotary_dim <= 0 || cfg.rotary_dim % 2 != 0 || cfg.rotary_dim > cfg.head_dim)
    throw std::invalid_argument("apply_rope: rotary_dim must be even and within head_dim");
  const int rot = cfg.rotary_dim, half = rot / 2;
  cpu::parallel_for(T, 8, [&](int64_t t0, int64_t t1) {
    float* c = cpu::scratch<float>(cpu::Scratch::kRope, 3 * static_cast<size_t>(rot));
    float* s = c + rot;
    float* xr = s + rot;
    for (int64_t t = t0; t < t1; ++t) {
      rope_cos_sin(cfg, pos_t[t], pos_h[t], pos_w[t], c, s);
      for (int64_t h = 0; h < heads; ++h) {
        uint16_t* v = x + (t * heads + h) * cfg.head_dim;
        for (int i = 0; i < rot; ++i) xr[i] = bf16_bits_to_f32(v[i]);
        for (int i = 0; i < rot; ++i) {
          const float rh = i < half ? -xr[i + half] : xr[i - half];
          v[i] = f32_to_bf16_bits(round_bf16(xr[i] * c[i]) + round_bf16(rh * s[i]));
        }
      }
    }
  });
}

}  // namespace fp4serve::kernels
