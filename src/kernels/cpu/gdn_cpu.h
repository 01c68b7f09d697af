// The CPU entry points of the Gated DeltaNet ops (kernels/gdn.h has the dimensions, the state and
// the math the functions below document per step).
#pragma once

#include <cstdint>
#include <span>
#include "kernels/cpu/cpu_features.h"
#include "kernels/gdn.h"

namespace fp4serve::kernels {

using cpu::Isa;

// Causal depthwise conv over time + SiLU, continuing from `state`; the same call serves decode
// (T = 1) and prefill (any T; a fresh sequence has a zero state = HF's zero padding).
//   pre[t,c] = sum_{j<Kc} w[c,j] * X[t-(Kc-1)+j, c]   (fp32 fma chain in j order; X[<0] from state)
//   out[t,c] = bf16(silu(bf16(pre)))                  (HF: bf16 conv1d, then SiLU on bf16)
// x: [T, C] bf16 raw in_proj_qkv output; w: [C, Kc] bf16 (conv1d.weight squeezed);
// state: [Kc-1, C] bf16 raw inputs, oldest first, updated to the last Kc-1 inputs; out: [T, C].
void gdn_conv1d(const uint16_t* x, int64_t T, int64_t C, const uint16_t* w, int Kc, uint16_t* state, uint16_t* out,
                Isa isa = cpu::active_isa());

// Decay and write strength (HF forward; fused_gdn_gating in vLLM):
//   beta[t,h] = bf16(sigmoid(b[t,h]))                             (bf16 in HF)
//   g[t,h]    = -exp(A_log[h]) * softplus(a[t,h] + dt_bias[h])     (fp32, threshold 20)
// a, b: [T, Hv] floats holding bf16 values (projection outputs); A_log: bf16-rounded values (HF casts
// the F32 checkpoint tensor); dt_bias: bf16 values.
void gdn_gating(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t T, int Hv,
                float* g, float* beta);

// The gated delta rule over T tokens of one sequence, recurrent form (docs/model-arch.md §2.2.1), fp32:
//   q, k = l2norm(q), l2norm(k) = x * rsqrt(sum(x*x) + 1e-6) evaluated on the bf16 tensors, every
//          op rounded to bf16 (transformers 5.12.1 normalizes before its fp32 cast; other versions and
//          FLA normalize in fp32: docs/model-arch.md §6.5);  then fp32: q *= float(1/sqrt(dk))
//   per v head j (k head j / (Hv/Hk)), per token: S *= exp(g); kvm = S^T k; d = (v - kvm) * beta;
//   S += k d^T; o = S^T q;  out = bf16(o)
// qkv: [T, conv_dim] bf16 (conv output: q | k | v); g, beta: [T, Hv]; state: [Hv][dk][dv] fp32,
// updated in place; out: [T, Hv*dv] bf16. Work is split over v heads only.
void gdn_recurrent(const uint16_t* qkv, int64_t T, const GdnDims& dims, const float* g, const float* beta,
                   float* state, uint16_t* out, Isa isa = cpu::active_isa());

// One sequence's rows of a batched call (the _seqs functions below): its T rows of x (raw
// in_proj_qkv output), qkv (conv output), g, beta and out, each [T, width] contiguous, and its state.
struct GdnRows {
  const uint16_t* x;
  int64_t T;
  uint16_t* conv_state;
  float* ssm;
  uint16_t* qkv;
  const float* g;
  const float* beta;
  uint16_t* out;
};

// gdn_conv1d and gdn_recurrent for several sequences at once (distinct states): one parallel
// region over (sequence x channel block), resp. (sequence x v head), so a batch of short sequences
// (decode) keeps every thread busy. Each sequence gets the bits the single-sequence call gives.
void gdn_conv1d_seqs(std::span<const GdnRows> seqs, int64_t C, const uint16_t* w, int Kc, Isa isa = cpu::active_isa());
void gdn_recurrent_seqs(std::span<const GdnRows> seqs, const GdnDims& dims, Isa isa = cpu::active_isa());

}  // namespace fp4serve::kernels
