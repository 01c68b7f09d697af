#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/gdn.h"
#include "kernels/norm.h"

namespace fp4serve::kernels {

void gdn_conv1d(const uint16_t* x, int64_t T, int64_t C, const uint16_t* w, int Kc, uint16_t* state, uint16_t* out) {
  if (Kc < 1 || Kc > 16) throw std::invalid_argument("gdn_conv1d: kernel size must be in [1, 16]");
  const int hist = Kc - 1;
  cpu::parallel_for(C, 256, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      float wc[16], win[16];  // win: the last Kc raw inputs, oldest first
      for (int j = 0; j < Kc; ++j) wc[j] = bf16_bits_to_f32(w[c * Kc + j]);
      for (int j = 0; j < hist; ++j) win[j] = bf16_bits_to_f32(state[j * C + c]);
      for (int64_t t = 0; t < T; ++t) {
        win[hist] = bf16_bits_to_f32(x[t * C + c]);
        float acc = 0.0f;
        for (int j = 0; j < Kc; ++j) acc = std::fma(wc[j], win[j], acc);
        out[t * C + c] = f32_to_bf16_bits(silu(round_bf16(acc)));
        for (int j = 0; j < hist; ++j) win[j] = win[j + 1];
      }
      for (int j = 0; j < hist; ++j) state[j * C + c] = f32_to_bf16_bits(win[j]);
    }
  });
}

void gdn_gating(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t T, int Hv,
                float* g, float* beta) {
  for (int64_t t = 0; t < T; ++t) {
    for (int h = 0; h < Hv; ++h) {
      const int64_t i = t * Hv + h;
      beta[i] = round_bf16(sigmoid(b[i]));
      g[i] = -std::exp(A_log[h]) * softplus(a[i] + dt_bias[h]);
    }
  }
}

namespace {

// HF's l2norm on a bf16 tensor: x * rsqrt(sum(x * x) + 1e-6), every op producing a bf16 tensor
// (products rounded, the sum accumulated in fp32 then rounded, the eps add, rsqrt and the final
// multiply each rounded). x holds bf16 values and is overwritten with the normalized bf16 values.
void l2norm_bf16_rows(float* x, int64_t rows, int64_t D) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x + r * D;
    float sum = 0.0f;
    for (int64_t i = 0; i < D; ++i) sum += round_bf16(row[i] * row[i]);
    const float denom = round_bf16(round_bf16(sum) + 1e-6f);
    const float inv = round_bf16(1.0f / std::sqrt(denom));
    for (int64_t i = 0; i < D; ++i) row[i] = round_bf16(row[i] * inv);
  }
}

}  // namespace

void gdn_recurrent(const uint16_t* qkv, int64_t T, const GdnDims& d, const float* g, const float* beta,
                   float* state, uint16_t* out, Isa isa) {
  if (d.Hk <= 0 || d.Hv % d.Hk != 0) throw std::invalid_argument("gdn_recurrent: Hv must be a multiple of Hk");
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  const int64_t C = d.conv_dim(), KD = d.key_dim();
  // q and k of every token, normalized once: [T][Hk][dk] each.
  std::vector<float> q(static_cast<size_t>(T * KD)), k(static_cast<size_t>(T * KD));
  for (int64_t t = 0; t < T; ++t) {
    bf16_to_f32(qkv + t * C, q.data() + t * KD, KD);
    bf16_to_f32(qkv + t * C + KD, k.data() + t * KD, KD);
  }
  // HF (torch_chunk/recurrent_gated_delta_rule) normalizes q and k BEFORE casting to fp32, i.e. in
  // bf16 arithmetic: see l2norm_bf16_rows. (FLA's Triton kernel does it in fp32; HF is the reference.)
  l2norm_bf16_rows(q.data(), T * d.Hk, d.dk);
  l2norm_bf16_rows(k.data(), T * d.Hk, d.dk);
  const float qscale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  for (float& v : q) v = v * qscale;
  const int group = d.Hv / d.Hk;
  cpu::parallel_for(d.Hv, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> v(d.dv), o(d.dv), scratch(d.dv);
    for (int64_t h = h0; h < h1; ++h) {
      float* S = state + h * d.dk * d.dv;
      const int64_t kh = h / group;
      for (int64_t t = 0; t < T; ++t) {
        bf16_to_f32(qkv + t * C + 2 * KD + h * d.dv, v.data(), d.dv);
        const float decay = std::exp(g[t * d.Hv + h]);
        kt.gdn_step(S, q.data() + (t * d.Hk + kh) * d.dk, k.data() + (t * d.Hk + kh) * d.dk, v.data(), decay,
                    beta[t * d.Hv + h], d.dk, d.dv, o.data(), scratch.data());
        f32_to_bf16(o.data(), out + t * d.value_dim() + h * d.dv, d.dv);
      }
    }
  });
}

}  // namespace fp4serve::kernels
