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

namespace {

constexpr int64_t kConvBlock = 512;  // channels per conv work item

// The conv of channels [c0, c0 + n) of one sequence (n <= kConvBlock), wt = its weights [Kc][kConvBlock]
// as floats. Row-major over the block: each tap is one elementwise fma over the block's row
// (pre[c] = fma(w[c][j], in[t - hist + j][c], pre[c]) for j in order). A per-channel walk down the
// token axis would stride C * 2 bytes per step: a TLB miss per load.
void conv_block(const GdnRows& s, int64_t C, int Kc, int64_t c0, int64_t n, const float* wt,
                const cpu::KernelTable& kt) {
  const int hist = Kc - 1;
  float* ring = cpu::scratch<float>(cpu::Scratch::kConvRing, static_cast<size_t>(Kc * kConvBlock));
  float* pre = cpu::scratch<float>(cpu::Scratch::kConvPre, static_cast<size_t>(kConvBlock));
  // ring row (p mod Kc) holds the raw input at position p (p < 0: the state's rows).
  auto row = [&](int64_t p) { return ring + ((p % Kc + Kc) % Kc) * kConvBlock; };
  for (int j = 0; j < hist; ++j) bf16_to_f32(s.conv_state + j * C + c0, row(j - hist), n);
  for (int64_t t = 0; t < s.T; ++t) {
    bf16_to_f32(s.x + t * C + c0, row(t), n);
    std::fill(pre, pre + n, 0.0f);
    for (int j = 0; j < Kc; ++j) kt.fma_rows(wt + j * kConvBlock, row(t - hist + j), pre, n);
    uint16_t* o = s.qkv + t * C + c0;
    for (int64_t c = 0; c < n; ++c) o[c] = f32_to_bf16_bits(silu(round_bf16(pre[c])));
  }
  for (int j = 0; j < hist; ++j) f32_to_bf16(row(s.T - hist + j), s.conv_state + j * C + c0, n);
}

}  // namespace

void gdn_conv1d_seqs(std::span<const GdnRows> seqs, int64_t C, const uint16_t* w, int Kc, Isa isa) {
  if (Kc < 1 || Kc > 16) throw std::invalid_argument("gdn_conv1d: kernel size must be in [1, 16]");
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  const int64_t blocks = (C + kConvBlock - 1) / kConvBlock;
  // Work item i = (channel block i / S, sequence i % S): a thread's range mostly keeps one block's weights.
  const int64_t S = static_cast<int64_t>(seqs.size());
  cpu::parallel_for(S * blocks, 1, [&](int64_t i0, int64_t i1) {
    float* wt = cpu::scratch<float>(cpu::Scratch::kConvWeights, static_cast<size_t>(Kc * kConvBlock));
    int64_t loaded = -1;  // the channel block whose weights wt holds
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t b = i / S, c0 = b * kConvBlock, n = std::min(kConvBlock, C - c0);
      if (b != loaded) {
        for (int j = 0; j < Kc; ++j)
          for (int64_t c = 0; c < n; ++c) wt[j * kConvBlock + c] = bf16_bits_to_f32(w[(c0 + c) * Kc + j]);
        loaded = b;
      }
      conv_block(seqs[static_cast<size_t>(i % S)], C, Kc, c0, n, wt, kt);
    }
  });
}

void gdn_conv1d(const uint16_t* x, int64_t T, int64_t C, const uint16_t* w, int Kc, uint16_t* state, uint16_t* out,
                Isa isa) {
  const GdnRows s{x, T, state, nullptr, out, nullptr, nullptr, nullptr};
  gdn_conv1d_seqs(std::span<const GdnRows>(&s, 1), C, w, Kc, isa);
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

void gdn_recurrent_seqs(std::span<const GdnRows> seqs, const GdnDims& d, Isa isa) {
  if (d.Hk <= 0 || d.Hv % d.Hk != 0) throw std::invalid_argument("gdn_recurrent: Hv must be a multiple of Hk");
  const cpu::KernelTable& kt = cpu::kernel_table(isa);
  const int64_t C = d.conv_dim(), KD = d.key_dim(), S = static_cast<int64_t>(seqs.size());
  // q and k of every sequence's tokens, normalized once: [rows][Hk][dk] each, sequence s's rows from
  // first[s] (the sequences' rows in order); Tmax: the most rows of one sequence.
  int64_t* first = cpu::scratch<int64_t>(cpu::Scratch::kGdnFirst, static_cast<size_t>(S + 1));
  int64_t Tmax = 0;
  first[0] = 0;
  for (int64_t s = 0; s < S; ++s) {
    first[s + 1] = first[s] + seqs[s].T;
    Tmax = std::max(Tmax, seqs[s].T);
  }
  float* q = cpu::scratch<float>(cpu::Scratch::kGdnQ, static_cast<size_t>(first[S] * KD));
  float* k = cpu::scratch<float>(cpu::Scratch::kGdnK, static_cast<size_t>(first[S] * KD));
  const float qscale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.dk)));
  // HF (torch_chunk/recurrent_gated_delta_rule) normalizes q and k BEFORE casting to fp32, i.e. in
  // bf16 arithmetic: see l2norm_bf16_rows. (FLA's Triton kernel does it in fp32; HF is the reference.)
  // Rows are independent: any split of them gives the same values.
  cpu::parallel_for(S, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const GdnRows& r = seqs[s];
      float* qs = q + first[s] * KD;
      float* ks = k + first[s] * KD;
      for (int64_t t = 0; t < r.T; ++t) {
        bf16_to_f32(r.qkv + t * C, qs + t * KD, KD);
        bf16_to_f32(r.qkv + t * C + KD, ks + t * KD, KD);
      }
      l2norm_bf16_rows(qs, r.T * d.Hk, d.dk);
      l2norm_bf16_rows(ks, r.T * d.Hk, d.dk);
      for (int64_t i = 0; i < r.T * KD; ++i) qs[i] = qs[i] * qscale;
    }
  });
  const int group = d.Hv / d.Hk;
  // Work item i = (sequence i / Hv, v head i % Hv).
  cpu::parallel_for(S * d.Hv, 1, [&](int64_t i0, int64_t i1) {
    float* v = cpu::scratch<float>(cpu::Scratch::kGdnV, static_cast<size_t>(Tmax * d.dv));
    float* o = cpu::scratch<float>(cpu::Scratch::kGdnOut, static_cast<size_t>(Tmax * d.dv));
    float* decay = cpu::scratch<float>(cpu::Scratch::kGdnDecay, static_cast<size_t>(Tmax));
    float* bt = cpu::scratch<float>(cpu::Scratch::kGdnBeta, static_cast<size_t>(Tmax));
    float* scratch = cpu::scratch<float>(cpu::Scratch::kGdnStep, static_cast<size_t>(2 * d.dv));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t s = i / d.Hv, h = i % d.Hv, T = seqs[s].T;
      const GdnRows& r = seqs[s];
      float* Sh = r.ssm + h * d.dk * d.dv;
      const int64_t kh = h / group;
      for (int64_t t = 0; t < T; ++t) {
        bf16_to_f32(r.qkv + t * C + 2 * KD + h * d.dv, v + t * d.dv, d.dv);
        decay[t] = std::exp(r.g[t * d.Hv + h]);
        bt[t] = r.beta[t * d.Hv + h];
      }
      kt.gdn_tokens(Sh, q + first[s] * KD + kh * d.dk, d.Hk * d.dk, k + first[s] * KD + kh * d.dk, d.Hk * d.dk, v,
                    d.dv, decay, bt, T, d.dk, d.dv, o, d.dv, scratch);
      for (int64_t t = 0; t < T; ++t) f32_to_bf16(o + t * d.dv, r.out + t * d.value_dim() + h * d.dv, d.dv);
    }
  });
}

void gdn_recurrent(const uint16_t* qkv, int64_t T, const GdnDims& d, const float* g, const float* beta,
                   float* state, uint16_t* out, Isa isa) {
  const GdnRows s{nullptr, T, nullptr, state, const_cast<uint16_t*>(qkv), g, beta, out};
  gdn_recurrent_seqs(std::span<const GdnRows>(&s, 1), d, isa);
}

}  // namespace fp4serve::kernels
