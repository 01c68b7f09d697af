#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/gdn.h"
#include "kernels/cpu/norm_cpu.h"
#include "kernels/cpu/gdn_cpu.h"

namespace fp4serve::kernels {

void gdn_conv1d(const uint16_t* x, int64_t T, int64_t C, const uint16_t* w, int Kc, uint16_t* state, uint16_t* out,
                Isa isa) {
  if (Kc < 1 || Kc > 16) throw std::invalid_argument("gdn_conv1d: kernel size must be in [1, 16]");
  const int hist = Kc - 1;
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  // Row-major over blocks of channels: each tap is one elementwise fma over the block's row
  // (pre[c] = fma(w[c][j], in[t - hist + j][c], pre[c]) for j in order, as before per element).
  // The old per-channel walk down the token axis strode C * 2 bytes per step: a TLB miss per load.
  constexpr int64_t kBlock = 512;
  cpu::parallel_for((C + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
    float* wt = cpu::scratch<float>(cpu::Scratch::kConvWeights, static_cast<size_t>(Kc * kBlock));
    float* ring = cpu::scratch<float>(cpu::Scratch::kConvRing, static_cast<size_t>(Kc * kBlock));
    float* pre = cpu::scratch<float>(cpu::Scratch::kConvPre, static_cast<size_t>(kBlock));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t c0 = b * kBlock, n = std::min(kBlock, C - c0);
      for (int j = 0; j < Kc; ++j)
        for (int64_t c = 0; c < n; ++c) wt[j * kBlock + c] = bf16_bits_to_f32(w[(c0 + c) * Kc + j]);
      // ring row (p mod Kc) holds the raw input at position p (p < 0: the state's rows).
      auto row = [&](int64_t p) { return ring + ((p % Kc + Kc) % Kc) * kBlock; };
      for (int j = 0; j < hist; ++j) bf16_to_f32(state + j * C + c0, row(j - hist), n);
      for (int64_t t = 0; t < T; ++t) {
        bf16_to_f32(x + t * C + c0, row(t), n);
        std::fill(pre, pre + n, 0.0f);
        for (int j = 0; j < Kc; ++j) kt.fma_rows(wt + j * kBlock, row(t - hist + j), pre, n);
        uint16_t* o = out + t * C + c0;
        for (int64_t c = 0; c < n; ++c) o[c] = f32_to_bf16_bits(silu(round_bf16(pre[c])));
      }
      for (int j = 0; j < hist; ++j) f32_to_bf16(row(T - hist + j), state + j * C + c0, n);
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
  float* q = cpu::scratch<float>(cpu::Scratch::kGdnQ, static_cast<size_t>(T * KD));
  float* k = cpu::scratch<float>(cpu::Scratch::kGdnK, static_cast<size_t>(T * KD));
  for (int64_t t = 0; t < T; ++t) {
    bf16_to_f32(qkv + t * C, q + t * KD, KD);
    bf16_to_f32(qkv + t * C + KD, k + t * KD, KD);
  }
  // HF (torch_chunk/recurrent_gated_delta_rule) normalizes q and k BEFORE casting to fp32, i.e. in
  // bf16 arithmetic: see l2norm_bf16_rows. (FLA's Triton kernel does it in fp32; HF is the reference.)
  l2norm_bf16_rows(q, T * d.Hk, d.dk);
  l2norm_bf16_rows(k, T * d.Hk, d.dk);
  const float qscale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  for (int64_t i = 0; i < T * KD; ++i) q[i] = q[i] * qscale;
  const int group = d.Hv / d.Hk;
  cpu::parallel_for(d.Hv, 1, [&](int64_t h0, int64_t h1) {
    float* v = cpu::scratch<float>(cpu::Scratch::kGdnV, static_cast<size_t>(T * d.dv));
    float* o = cpu::scratch<float>(cpu::Scratch::kGdnOut, static_cast<size_t>(T * d.dv));
    float* decay = cpu::scratch<float>(cpu::Scratch::kGdnDecay, static_cast<size_t>(T));
    float* bt = cpu::scratch<float>(cpu::Scratch::kGdnBeta, static_cast<size_t>(T));
    float* scratch = cpu::scratch<float>(cpu::Scratch::kGdnStep, static_cast<size_t>(2 * d.dv));
    for (int64_t h = h0; h < h1; ++h) {
      float* S = state + h * d.dk * d.dv;
      const int64_t kh = h / group;
      for (int64_t t = 0; t < T; ++t) {
        bf16_to_f32(qkv + t * C + 2 * KD + h * d.dv, v + t * d.dv, d.dv);
        decay[t] = std::exp(g[t * d.Hv + h]);
        bt[t] = beta[t * d.Hv + h];
      }
      kt.gdn_tokens(S, q + kh * d.dk, d.Hk * d.dk, k + kh * d.dk, d.Hk * d.dk, v, d.dv, decay, bt, T, d.dk, d.dv, o,
                    d.dv, scratch);
      for (int64_t t = 0; t < T; ++t) f32_to_bf16(o + t * d.dv, out + t * d.value_dim() + h * d.dv, d.dv);
    }
  });
}

}  // namespace fp4serve::kernels
