// Gated DeltaNet pieces of Qwen3.5/3.6 linear-attention layers (model-arch.md 2.2, 3, 6.1-6.5;
// HF Qwen3_5MoeGatedDeltaNet). Per-sequence state: conv state (raw pre-activation inputs) and the
// fp32 recurrent state S[Hv][dk][dv].
//
// The delta rule runs in its recurrent form for prefill too, so a prefill split anywhere gives the
// same bits as one long prefill (the chunked form reassociates across chunk boundaries).
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu_features.h"

namespace fp4serve::kernels {

using cpu::Isa;

struct GdnDims {
  int Hk = 16;  // linear_num_key_heads
  int Hv = 32;  // linear_num_value_heads (a multiple of Hk; v head j uses k head j / (Hv/Hk))
  int dk = 128;
  int dv = 128;
  int conv_kernel = 4;
  int64_t key_dim() const { return static_cast<int64_t>(Hk) * dk; }
  int64_t value_dim() const { return static_cast<int64_t>(Hv) * dv; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // channels [q | k | v]
  int64_t conv_state_elems() const { return static_cast<int64_t>(conv_kernel - 1) * conv_dim(); }
  int64_t state_elems() const { return static_cast<int64_t>(Hv) * dk * dv; }
};

// Where one sequence's state of one GDN layer lives (device memory of the backend that allocated it).
struct GdnStateRef {
  uint16_t* conv = nullptr;  // [Kc-1, conv_dim] bf16 raw inputs, oldest first
  float* ssm = nullptr;      // [Hv, dk, dv] fp32
};

// Causal depthwise conv over time + SiLU, continuing from `state`; the same call serves decode
// (T = 1) and prefill (any T; a fresh sequence has a zero state = HF's zero padding).
//   pre[t,c] = sum_{j<Kc} w[c,j] * X[t-(Kc-1)+j, c]   (fp32 fma chain in j order; X[<0] from state)
//   out[t,c] = bf16(silu(bf16(pre)))                  (HF: bf16 conv1d, then SiLU on bf16)
// x: [T, C] bf16 raw in_proj_qkv output; w: [C, Kc] bf16 (conv1d.weight squeezed);
// state: [Kc-1, C] bf16 raw inputs, oldest first, updated to the last Kc-1 inputs; out: [T, C].
void gdn_conv1d(const uint16_t* x, int64_t T, int64_t C, const uint16_t* w, int Kc, uint16_t* state, uint16_t* out);

// Decay and write strength (HF forward; fused_gdn_gating in vLLM):
//   beta[t,h] = bf16(sigmoid(b[t,h]))                             (bf16 in HF)
//   g[t,h]    = -exp(A_log[h]) * softplus(a[t,h] + dt_bias[h])     (fp32, threshold 20)
// a, b: [T, Hv] floats holding bf16 values (projection outputs); A_log: bf16-rounded values (HF casts
// the F32 checkpoint tensor); dt_bias: bf16 values.
void gdn_gating(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t T, int Hv,
                float* g, float* beta);

// The gated delta rule over T tokens of one sequence, recurrent form (model-arch.md 2.2.1), fp32:
//   q, k = l2norm(q), l2norm(k) = x * rsqrt(sum(x*x) + 1e-6) evaluated on the bf16 tensors, every
//          op rounded to bf16 (transformers 5.12.1 normalizes before its fp32 cast; model-arch.md's
//          "fp32 in kernel" describes other versions / FLA);  then fp32: q *= float(1/sqrt(dk))
//   per v head j (k head j / (Hv/Hk)), per token: S *= exp(g); kvm = S^T k; d = (v - kvm) * beta;
//   S += k d^T; o = S^T q;  out = bf16(o)
// qkv: [T, conv_dim] bf16 (conv output: q | k | v); g, beta: [T, Hv]; state: [Hv][dk][dv] fp32,
// updated in place; out: [T, Hv*dv] bf16. Work is split over v heads only.
void gdn_recurrent(const uint16_t* qkv, int64_t T, const GdnDims& dims, const float* g, const float* beta,
                   float* state, uint16_t* out, Isa isa = cpu::active_isa());

}  // namespace fp4serve::kernels
