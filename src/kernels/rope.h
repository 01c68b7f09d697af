// Partial interleaved multimodal RoPE of Qwen3.5/3.6 attention (docs/model-arch.md §2.3.1, §6.6).
//   inv_freq[i] = 1 / theta^(2i / rot)  (fp32), i < rot/2
//   axis(i) = H if i % 3 == 1 and i < 3*sections[1]; W if i % 3 == 2 and i < 3*sections[2]; else T
//   f[i] = pos_axis(i) * inv_freq[i];  cos/sin over concat(f, f), computed in fp32, cast to bf16
//   x'[i] = bf16(bf16(x[i] * cos[i]) + bf16(rot_half(x)[i] * sin[i]))  for i < rot (NeoX pairs i, i+rot/2)
//   rot_half(x) = concat(-x[rot/2 : rot], x[0 : rot/2]); dims >= rot pass through.
// For text all three position axes are the token index, which reduces to plain NeoX RoPE.
#pragma once

#include <cstdint>

namespace fp4serve::kernels {

struct RopeConfig {
  int head_dim = 256;
  int rotary_dim = 64;  // head_dim * partial_rotary_factor
  float theta = 1e7f;
  int sections[3] = {11, 11, 10};  // mrope_section (T, H, W)
};

// cos and sin (rotary_dim values each, bf16-rounded fp32) for one token at positions (t, h, w).
void rope_cos_sin(const RopeConfig& cfg, int64_t pos_t, int64_t pos_h, int64_t pos_w, float* cos, float* sin);

}  // namespace fp4serve::kernels
