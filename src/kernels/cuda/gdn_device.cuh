// The per-thread bodies of the Gated DeltaNet kernels (gdn_cuda.cu launches them; gdn_plan.h lays
// out the launches). Host-and-device, so tests/unit/kernels/cuda_gdn_test.cpp runs these same
// functions on the CPU, thread by thread in the kernels' phase order, against the CPU op: the index
// arithmetic and the operation sequence are checked here, without a GPU.
//
// Every body repeats the CPU op's operation sequence (cpu/gdn_cpu.cpp; kernels_scalar.cpp's
// gdn_step, which every CPU tier reproduces), so the results are the CPU's bits, and a sequence's
// rows give the same bits however they are split.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_limits.h"
#include "kernels/cuda/gdn_math.cuh"
#include "kernels/cuda/gdn_plan.h"

namespace fp4serve::kernels::cuda::gdn_device {

using namespace gdn_math;

// ---- gating: one thread per (t, h) ----------------------------------------------------------------

struct GatingArgs {
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  const float* A_log;
  const float* dt_bias;
  int64_t T;
  int Hv;
  float* g;
  int64_t ldg;
  float* beta;
  int64_t ldbeta;
};

// beta = bf16(sigmoid(b)); g = -exp(A_log) * softplus(a + dt_bias)   (gdn_cpu.cpp gdn_gating)
GDN_HD void gating_element(const GatingArgs& p, int64_t n) {
  const int64_t t = n / p.Hv;
  const int h = static_cast<int>(n % p.Hv);
  p.beta[t * p.ldbeta + h] = round_bf16(sigmoid(p.b[t * p.ldb + h]));
  p.g[t * p.ldg + h] = mul_rn(-exp_f32(p.A_log[h]), softplus(add_rn(p.a[t * p.lda + h], p.dt_bias[h])));
}

// ---- conv1d: one thread per (t, c); then the state shift and the l2norm factors -----------------

struct ConvArgs {
  const uint16_t* x;  // the sequence's raw rows [rows, C]
  int64_t ldx;
  int64_t rows, C;
  const uint16_t* w;  // [C, Kc]
  int Kc;
  uint16_t* state;    // [Kc-1, C] raw inputs, oldest first
  uint16_t* out;      // the sequence's qkv_out rows [rows, C]
  int64_t ldo;
  int Hk, dk;
  float* inv;         // [rows][2][Hk] l2norm factors of q and k
  const float* g;     // the sequence's rows of g [rows, Hv]
  int64_t ldg;
  int Hv;
  float* decay;       // [rows][Hv] exp(g)
};

// out[t, c] = bf16(silu(bf16(pre))), pre = fma chain over the taps j = 0 .. Kc-1 in order, from +0,
// of w[c, j] * X[t - (Kc-1) + j, c], X[p < 0] being conv-state row p + Kc - 1 (gdn_cpu.cpp
// gdn_conv1d). Reads the state only: state_shift runs after every conv_element.
GDN_HD void conv_element(const ConvArgs& p, int64_t n) {
  const int64_t t = n / p.C, c = n % p.C;
  const int hist = p.Kc - 1;
  float pre = 0.0f;
  for (int j = 0; j < p.Kc; ++j) {
    const int64_t q = t - hist + j;
    const uint16_t raw = q < 0 ? p.state[(q + hist) * p.C + c] : p.x[q * p.ldx + c];
    pre = fma_f32(bf16_to_f32(p.w[c * p.Kc + j]), bf16_to_f32(raw), pre);
  }
  p.out[t * p.ldo + c] = f32_to_bf16(silu(round_bf16(pre)));
}

// State row j (j < Kc-1) becomes the raw input at position rows - (Kc-1) + j. A position < 0 is old
// state row rows + j, which is above j: this same thread reads it before it overwrites it (rows are
// walked upward), so the shift is safe in place when rows < Kc-1.
GDN_HD void state_shift(const ConvArgs& p, int64_t c) {
  const int hist = p.Kc - 1;
  for (int j = 0; j < hist; ++j) {
    const int64_t q = p.rows - hist + j;
    p.state[j * p.C + c] = q < 0 ? p.state[(q + hist) * p.C + c] : p.x[q * p.ldx + c];
  }
}

// Thread n = (t * 2 + part) * Hk + h, part 0 = q, 1 = k: HF's l2norm factor of that head vector of
// the conv output, on bf16 tensors (gdn_cpu.cpp l2norm_bf16_rows): sum += bf16(e * e) in order from
// +0, inv = bf16(1 / sqrt(bf16(bf16(sum) + 1e-6))). The q | k channels of a row are 2 Hk vectors of
// dk, so vector n % (2 Hk) of row t starts at channel (n % (2 Hk)) * dk.
GDN_HD void l2norm_factor(const ConvArgs& p, int64_t n) {
  const int64_t t = n / (2 * p.Hk), vec = n % (2 * p.Hk);
  const uint16_t* v = p.out + t * p.ldo + vec * p.dk;
  float sum = 0.0f;
  for (int i = 0; i < p.dk; ++i) {
    const float e = bf16_to_f32(v[i]);
    sum = add_rn(sum, round_bf16(mul_rn(e, e)));
  }
  const float denom = round_bf16(add_rn(round_bf16(sum), 1e-6f));
  p.inv[n] = round_bf16(div_rn(1.0f, sqrt_f32(denom)));
}

// Thread n = t * Hv + h: the decay exp(g) of that row and head (gdn_cpu.cpp gdn_recurrent), here
// rather than in the rule's sequential loop, where a double exp would sit on the critical path of
// every token (FP64 runs at 1/64 rate on consumer GPUs).
GDN_HD void decay_factor(const ConvArgs& p, int64_t n) {
  p.decay[n] = exp_f32(p.g[(n / p.Hv) * p.ldg + n % p.Hv]);
}

// ---- one call's sequences: the staged descs and row map (gdn_plan.h's gdn_stage) ------------------
// The step-wide arguments (`b`: x, qkv_out, g and the scratch from row 0, rows = the step's rows)
// narrowed to sequence s: its first row, its rows, its conv state.
GDN_HD ConvArgs conv_for(const ConvArgs& b, const GdnSeqDev& s) {
  ConvArgs p = b;
  p.x = b.x + s.row0 * b.ldx;
  p.rows = s.rows;
  p.state = s.state.conv;
  p.out = b.out + s.row0 * b.ldo;
  p.inv = b.inv + s.row0 * 2 * b.Hk;
  p.g = b.g + s.row0 * b.ldg;
  p.decay = b.decay + s.row0 * b.Hv;
  return p;
}

// The conv kernel's thread n = (step row r, channel c); rows of no sequence do nothing.
GDN_HD void conv_thread(const ConvArgs& b, const GdnSeqDev* seqs, const int32_t* row_seq, int64_t n) {
  if (n >= b.rows * b.C) return;
  const int32_t i = row_seq[n / b.C];
  if (i < 0) return;
  conv_element(conv_for(b, seqs[i]), n - seqs[i].row0 * b.C);
}

// The prep kernel's state threads: n = (sequence i, channel c).
GDN_HD void shift_thread(const ConvArgs& b, const GdnSeqDev* seqs, int64_t nseqs, int64_t n) {
  if (n >= nseqs * b.C) return;
  const GdnSeqDev& s = seqs[n / b.C];
  if (s.rows > 0) state_shift(conv_for(b, s), n % b.C);
}

// The prep kernel's l2norm threads: n = (step row, q|k, k head).
GDN_HD void norm_thread(const ConvArgs& b, const GdnSeqDev* seqs, const int32_t* row_seq, int64_t n) {
  if (n >= b.rows * 2 * b.Hk) return;
  const int32_t i = row_seq[n / (2 * b.Hk)];
  if (i < 0) return;
  l2norm_factor(conv_for(b, seqs[i]), n - seqs[i].row0 * 2 * b.Hk);
}

// The prep kernel's decay threads: n = (step row, v head).
GDN_HD void decay_thread(const ConvArgs& b, const GdnSeqDev* seqs, const int32_t* row_seq, int64_t n) {
  if (n >= b.rows * b.Hv) return;
  const int32_t i = row_seq[n / b.Hv];
  if (i < 0) return;
  decay_factor(conv_for(b, seqs[i]), n - seqs[i].row0 * b.Hv);
}

// ---- the delta rule: a block of kRuleCols lanes per (v head h, column tile) ------------------------

struct RuleArgs {
  const uint16_t* qkv;  // the sequence's conv output rows [rows, C]: q | k | v
  int64_t ldq;
  const float* g;       // the sequence's rows of g [rows, Hv] (the chunked rule)
  int64_t ldg;
  const float* decay;   // [rows][Hv] exp(g) (the recurrent rule)
  const float* beta;    // [rows, Hv]
  int64_t ldb;
  const float* inv;     // [rows][2][Hk] l2norm factors of q and k
  float* S;             // [Hv][dk][dv], in place
  uint16_t* out;        // the sequence's core_out rows [rows, Hv * dv]
  int64_t ldo;
  int64_t rows;
  int Hk, Hv, dk, dv;
  float qscale;
};

// The step-wide rule arguments (`b`: every pointer at the step's row 0, S unset) narrowed to
// sequence s: its rows and its recurrent state.
GDN_HD RuleArgs rule_for(const RuleArgs& b, const GdnSeqDev& s) {
  RuleArgs a = b;
  a.qkv = b.qkv + s.row0 * b.ldq;
  a.g = b.g + s.row0 * b.ldg;
  a.decay = b.decay + s.row0 * b.Hv;
  a.beta = b.beta + s.row0 * b.ldb;
  a.inv = b.inv + s.row0 * 2 * b.Hk;
  a.S = s.state.ssm;
  a.out = b.out + s.row0 * b.ldo;
  a.rows = s.rows;
  return a;
}

inline constexpr int kPerLane = kGdnMaxDk / kWarpSize;  // q, k elements a lane stages per token

// The rule's functions come in two forms, by template argument kDk: dk at run time (kDk = 0), or
// fixed at compile time (kDk = kGdnUnrolledDk, the model's), where the loops over dk unroll fully.
// The lane's state column is col[i * kRuleCols], i < dk (col = the block's S tile + lane).
// GDN_UNROLL(n): `#pragma unroll n` on the device (n an integral constant expression).
#define GDN_PRAGMA(x) _Pragma(#x)
#if defined(__CUDA_ARCH__)
#define GDN_UNROLL(n) GDN_PRAGMA(unroll n)
#else
#define GDN_UNROLL(n)
#endif

template <int kDk>
GDN_HD int rule_dk(const RuleArgs& a) {
  return kDk > 0 ? kDk : a.dk;
}
// q, k elements a lane stages per token (the rest of TokenIn's arrays stay unused).
template <int kDk>
inline constexpr int kRulePerLane = kDk > 0 ? (kDk + kWarpSize - 1) / kWarpSize : kPerLane;

// What one token needs, loaded two tokens ahead so its global-memory latency hides behind the
// arithmetic of the tokens before it. Lane l holds q, k elements i = l + 32 r.
struct TokenIn {
  uint16_t q[kPerLane], k[kPerLane];
  uint16_t v;
  float decay, beta, iq, ik;
};

// The block's place: v head h (its k head kh), lane's state column j (col: j < dv).
struct RuleLane {
  int h, kh, j, lane;
  bool col;
};

GDN_HD RuleLane rule_lane(const RuleArgs& a, int block_h, int block_tile, int lane) {
  RuleLane l;
  l.h = block_h;
  l.kh = block_h / (a.Hv / a.Hk);
  l.j = block_tile * kRuleCols + lane;
  l.lane = lane;
  l.col = l.j < a.dv;
  return l;
}

// The lane's column of S[h] into col (zeros past dv), and back.
template <int kDk>
GDN_HD void rule_load_column(const RuleArgs& a, const RuleLane& l, float* col) {
  const int dk = rule_dk<kDk>(a);
  const float* Sh = a.S + static_cast<int64_t>(l.h) * dk * a.dv;
  GDN_UNROLL((kDk > 0 ? kDk : 16))
  for (int i = 0; i < dk; ++i) col[i * kRuleCols] = l.col ? Sh[static_cast<int64_t>(i) * a.dv + l.j] : 0.0f;
}

template <int kDk>
GDN_HD void rule_store_column(const RuleArgs& a, const RuleLane& l, const float* col) {
  if (!l.col) return;
  const int dk = rule_dk<kDk>(a);
  float* Sh = a.S + static_cast<int64_t>(l.h) * dk * a.dv;
  GDN_UNROLL((kDk > 0 ? kDk : 16))
  for (int i = 0; i < dk; ++i) Sh[static_cast<int64_t>(i) * a.dv + l.j] = col[i * kRuleCols];
}

template <int kDk>
GDN_HD TokenIn rule_load_token(const RuleArgs& a, const RuleLane& l, int64_t t) {
  const int dk = rule_dk<kDk>(a);
  TokenIn in;
  const uint16_t* row = a.qkv + t * a.ldq;
  const int64_t qoff = static_cast<int64_t>(l.kh) * dk, koff = static_cast<int64_t>(a.Hk) * dk + qoff;
  GDN_UNROLL((kRulePerLane<kDk>))
  for (int r = 0; r < kRulePerLane<kDk>; ++r) {
    const int i = l.lane + r * kWarpSize;
    in.q[r] = i < dk ? row[qoff + i] : uint16_t{0};
    in.k[r] = i < dk ? row[koff + i] : uint16_t{0};
  }
  in.v = l.col ? row[2 * static_cast<int64_t>(a.Hk) * dk + static_cast<int64_t>(l.h) * a.dv + l.j] : uint16_t{0};
  in.decay = a.decay[t * a.Hv + l.h];
  in.beta = a.beta[t * a.ldb + l.h];
  in.iq = a.inv[t * 2 * a.Hk + l.kh];
  in.ik = a.inv[t * 2 * a.Hk + a.Hk + l.kh];
  return in;
}

// The lane's share of the token's normalized q, k into the block's qs, ks [dk]:
//   q_i = bf16(q_raw_i * inv_q) * qscale;  k_i = bf16(k_raw_i * inv_k)
template <int kDk>
GDN_HD void rule_stage(const RuleArgs& a, const RuleLane& l, const TokenIn& in, float* qs, float* ks) {
  const int dk = rule_dk<kDk>(a);
  GDN_UNROLL((kRulePerLane<kDk>))
  for (int r = 0; r < kRulePerLane<kDk>; ++r) {
    const int i = l.lane + r * kWarpSize;
    if (i < dk) {
      qs[i] = mul_rn(round_bf16(mul_rn(bf16_to_f32(in.q[r]), in.iq)), a.qscale);
      ks[i] = round_bf16(mul_rn(bf16_to_f32(in.k[r]), in.ik));
    }
  }
}

// The delta rule per token (kernels_scalar.cpp gdn_step, which every CPU tier reproduces), for the
// lane's column j:
//   S_ij = S_ij * decay;  kvm = fma(S_ij, k_i, kvm)   (i in order, kvm from +0; decay = exp(g), prep's)
//   d = (v_j - kvm) * beta
//   S_ij = fma(k_i, d, S_ij);  o = fma(S_ij, q_i, o)   (i in order, o from +0);  out_j = bf16(o)
// As the avx512 tier's gdn_tokens, the second sweep of token t also does the first sweep of token
// t+1 (the same operations on each element in the same order, so the same bits): the kvm chain
// of t+1 and the o chain of t are independent, and interleaved they hide each other's latency.
// Lanes past dv run on zeros and store nothing.

// The first sweep alone (the sequence's first token): returns kvm.
template <int kDk>
GDN_HD float rule_decay_project(const RuleArgs& a, float decay, float* col, const float* ks) {
  const int dk = rule_dk<kDk>(a);
  float kvm = 0.0f;
  GDN_UNROLL((kDk > 0 ? kDk : 4))
  for (int i = 0; i < dk; ++i) {
    const float s = mul_rn(col[i * kRuleCols], decay);
    col[i * kRuleCols] = s;
    kvm = fma_f32(s, ks[i], kvm);
  }
  return kvm;
}

// Token t's update and output from its kvm; with `next`, fused with token t+1's first sweep
// (decay and k of t+1 in next_decay, ks_next), returning t+1's kvm.
template <int kDk>
GDN_HD float rule_update(const RuleArgs& a, const RuleLane& l, const TokenIn& in, float kvm, int64_t t, float* col,
                         const float* qs, const float* ks, bool next, float next_decay, const float* ks_next) {
  const int dk = rule_dk<kDk>(a);
  const float d = mul_rn(sub_rn(bf16_to_f32(in.v), kvm), in.beta);
  float o = 0.0f, next_kvm = 0.0f;
  if (next) {
    GDN_UNROLL((kDk > 0 ? kDk : 4))
    for (int i = 0; i < dk; ++i) {
      float s = fma_f32(ks[i], d, col[i * kRuleCols]);
      o = fma_f32(s, qs[i], o);
      s = mul_rn(s, next_decay);
      next_kvm = fma_f32(s, ks_next[i], next_kvm);
      col[i * kRuleCols] = s;
    }
  } else {
    GDN_UNROLL((kDk > 0 ? kDk : 4))
    for (int i = 0; i < dk; ++i) {
      const float s = fma_f32(ks[i], d, col[i * kRuleCols]);
      col[i * kRuleCols] = s;
      o = fma_f32(s, qs[i], o);
    }
  }
  if (l.col) a.out[t * a.ldo + static_cast<int64_t>(l.h) * a.dv + l.j] = f32_to_bf16(o);
  return next_kvm;
}

}  // namespace fp4serve::kernels::cuda::gdn_device

#undef GDN_UNROLL
#undef GDN_PRAGMA
