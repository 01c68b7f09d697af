// The chunked form of the delta rule (FLA's chunk_gated_delta_rule, the WY/UT form vLLM's fla ops
// use), per chunk of kGdnChunk tokens, fp32 state. Host-and-device phase bodies, as gdn_device.cuh:
// gdn_chunked.cu's kernel runs them with a __syncthreads between phases, and
// tests/unit/kernels/cuda_gdn_test.cpp runs them on the CPU against the CPU op (NMSE).
//
// Opt-in (gdn_plan.h): it reassociates the recurrence, so a prefill split at another point, or
// run token by token, gives other bits; the recurrent kernel is the default.
//
// Within a chunk (0-based t, s < L), with G_t = g_0 + ... + g_t (log decays), S0 the state before
// the chunk (a tile of kRuleCols columns), q scaled by qscale, and the deltas D (d_t of the
// recurrent form, one row per token):
//   (I + A) D = R,  A_ts = beta_t (k_t . k_s) exp(G_t - G_s)  (s < t),
//                   R_t  = beta_t (v_t - exp(G_t) S0^T k_t)
//   o_t  = exp(G_t) S0^T q_t + sum_{s <= t} (q_t . k_s) exp(G_t - G_s) D_s
//   S    = exp(G_{L-1}) S0 + sum_s exp(G_{L-1} - G_s) k_s D_s^T
// D by forward substitution (one lane per column). exp here is the device's expf: the chunked
// form is held to an NMSE, not to bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/gdn_device.cuh"

namespace fp4serve::kernels::cuda::gdn_chunked {

using namespace gdn_device;

inline constexpr int kChunkThreads = 128;

GDN_HD float exp_fast(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}

// Shared memory of a block, in floats from its base: the S tile [dk][kRuleCols]; A, QK
// [kGdnChunk][kGdnChunk]; V (v, then R, then D) [kGdnChunk][kRuleCols]; G, exp(G), exp(G_last - G),
// beta [kGdnChunk]; then q and k of the chunk as bf16 [kGdnChunk][dk + 2] (normalized values are
// bf16; the row padding keeps a warp's reads of 32 rows on distinct banks).
struct ChunkLayout {
  int dk = 0, kst = 0;
  int64_t S = 0, A = 0, QK = 0, V = 0, G = 0, eG = 0, eL = 0, beta = 0, Q = 0, K = 0;
  std::size_t bytes = 0;
};

GDN_HD ChunkLayout chunk_layout(int dk) {
  ChunkLayout l;
  l.dk = dk;
  l.kst = dk + 2;
  int64_t o = 0;
  l.S = o, o += static_cast<int64_t>(dk) * kRuleCols;
  l.A = o, o += kGdnChunk * kGdnChunk;
  l.QK = o, o += kGdnChunk * kGdnChunk;
  l.V = o, o += kGdnChunk * kRuleCols;
  l.G = o, o += kGdnChunk;
  l.eG = o, o += kGdnChunk;
  l.eL = o, o += kGdnChunk;
  l.beta = o, o += kGdnChunk;
  const int64_t qk_floats = (static_cast<int64_t>(kGdnChunk) * l.kst + 1) / 2;
  l.Q = o, o += qk_floats;
  l.K = o, o += qk_floats;
  l.bytes = static_cast<std::size_t>(o) * sizeof(float);
  return l;
}

struct Chunk {
  float *S, *A, *QK, *V, *G, *eG, *eL, *beta;
  uint16_t *Q, *K;
  int dk, kst;
  int h, kh, tile;
  int64_t t0;  // the chunk's first row in the sequence
  int L;       // its rows
};

GDN_HD Chunk chunk_at(float* base, const ChunkLayout& l, const RuleArgs& a, int h, int tile) {
  Chunk c;
  c.S = base + l.S, c.A = base + l.A, c.QK = base + l.QK, c.V = base + l.V;
  c.G = base + l.G, c.eG = base + l.eG, c.eL = base + l.eL, c.beta = base + l.beta;
  c.Q = reinterpret_cast<uint16_t*>(base + l.Q);
  c.K = reinterpret_cast<uint16_t*>(base + l.K);
  c.dk = l.dk, c.kst = l.kst;
  c.h = h, c.kh = h / (a.Hv / a.Hk), c.tile = tile;
  c.t0 = 0, c.L = 0;
  return c;
}

// The block's S tile from and to the state (zeros past dv). idx < dk * kRuleCols.
GDN_HD void chunk_load_state(const RuleArgs& a, const Chunk& c, int idx) {
  const int i = idx / kRuleCols, col = idx % kRuleCols, j = c.tile * kRuleCols + col;
  c.S[idx] = j < a.dv ? a.S[(static_cast<int64_t>(c.h) * c.dk + i) * a.dv + j] : 0.0f;
}
GDN_HD void chunk_store_state(const RuleArgs& a, const Chunk& c, int idx) {
  const int i = idx / kRuleCols, col = idx % kRuleCols, j = c.tile * kRuleCols + col;
  if (j < a.dv) a.S[(static_cast<int64_t>(c.h) * c.dk + i) * a.dv + j] = c.S[idx];
}

// Phase 1 (idx < L * dk; the v part idx < L * kRuleCols; the gates idx < L): the chunk's
// normalized q, k (as the recurrent kernel's: bf16(raw * inv)), v of the tile's columns, g, beta.
GDN_HD void chunk_load(const RuleArgs& a, const Chunk& c, int idx) {
  if (idx < c.L * c.dk) {
    const int t = idx / c.dk, i = idx % c.dk;
    const int64_t row = c.t0 + t;
    const uint16_t* x = a.qkv + row * a.ldq;
    const float iq = a.inv[row * 2 * a.Hk + c.kh], ik = a.inv[row * 2 * a.Hk + a.Hk + c.kh];
    c.Q[t * c.kst + i] = f32_to_bf16(mul_rn(bf16_to_f32(x[static_cast<int64_t>(c.kh) * c.dk + i]), iq));
    c.K[t * c.kst + i] =
        f32_to_bf16(mul_rn(bf16_to_f32(x[(static_cast<int64_t>(a.Hk) + c.kh) * c.dk + i]), ik));
  }
  if (idx < c.L * kRuleCols) {
    const int t = idx / kRuleCols, col = idx % kRuleCols, j = c.tile * kRuleCols + col;
    const uint16_t* x = a.qkv + (c.t0 + t) * a.ldq;
    c.V[idx] = j < a.dv ? bf16_to_f32(x[2 * static_cast<int64_t>(a.Hk) * c.dk + static_cast<int64_t>(c.h) * a.dv + j])
                        : 0.0f;
  }
  if (idx < c.L) {
    c.G[idx] = a.g[(c.t0 + idx) * a.ldg + c.h];
    c.beta[idx] = a.beta[(c.t0 + idx) * a.ldb + c.h];
  }
}

// Phase 2 (one thread): G as the running sum of g, and exp(G).
GDN_HD void chunk_cumsum(const Chunk& c) {
  float G = 0.0f;
  for (int t = 0; t < c.L; ++t) {
    G = add_rn(G, c.G[t]);
    c.G[t] = G;
    c.eG[t] = exp_fast(G);
  }
}

// Phase 3, three independent parts over idx:
//   idx < L * L:          (t, s): A_ts (s < t) and QK_ts = (q_t . k_s) qscale exp(G_t - G_s) (s <= t);
//   idx < L * kRuleCols:  (t, col): V_t = R_t = beta_t (v_t - exp(G_t) (k_t . S0[:, col]));
//   idx < L:              eL_s = exp(G_{L-1} - G_s).
GDN_HD void chunk_scores(const RuleArgs& a, const Chunk& c, int idx) {
  if (idx < c.L * c.L) {
    const int t = idx / c.L, s = idx % c.L;
    float kk = 0.0f, qk = 0.0f;
    if (s <= t) {
      for (int i = 0; i < c.dk; ++i) {
        const float ks = bf16_to_f32(c.K[s * c.kst + i]);
        kk = fma_f32(bf16_to_f32(c.K[t * c.kst + i]), ks, kk);
        qk = fma_f32(bf16_to_f32(c.Q[t * c.kst + i]), ks, qk);
      }
    }
    const float decay = s <= t ? exp_fast(sub_rn(c.G[t], c.G[s])) : 0.0f;
    c.A[t * kGdnChunk + s] = s < t ? mul_rn(mul_rn(c.beta[t], kk), decay) : 0.0f;
    c.QK[t * kGdnChunk + s] = s <= t ? mul_rn(mul_rn(qk, a.qscale), decay) : 0.0f;
  }
  if (idx < c.L * kRuleCols) {
    const int t = idx / kRuleCols, col = idx % kRuleCols;
    float kS = 0.0f;
    for (int i = 0; i < c.dk; ++i) kS = fma_f32(bf16_to_f32(c.K[t * c.kst + i]), c.S[i * kRuleCols + col], kS);
    c.V[idx] = mul_rn(c.beta[t], sub_rn(c.V[idx], mul_rn(c.eG[t], kS)));
  }
  if (idx < c.L) c.eL[idx] = exp_fast(sub_rn(c.G[c.L - 1], c.G[idx]));
}

// Phase 4 (lane col < kRuleCols): D = (I + A)^-1 R by forward substitution, in place in V's column.
// Row t's sum over s < t runs as four interleaved chains (s mod 4): this phase is one warp's
// sequential work, and four chains cut its dependent-latency path fourfold.
GDN_HD void chunk_solve(const Chunk& c, int col) {
  for (int t = 1; t < c.L; ++t) {
    const float* a = c.A + t * kGdnChunk;
    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int s = 0;
    for (; s + 4 <= t; s += 4)
      for (int k = 0; k < 4; ++k) p[k] = fma_f32(a[s + k], c.V[(s + k) * kRuleCols + col], p[k]);
    for (; s < t; ++s) p[s & 3] = fma_f32(a[s], c.V[s * kRuleCols + col], p[s & 3]);
    c.V[t * kRuleCols + col] = sub_rn(c.V[t * kRuleCols + col], add_rn(add_rn(p[0], p[1]), add_rn(p[2], p[3])));
  }
}

// Phase 5 (idx < L * kRuleCols): o_t for the tile's column, from S0 (not yet updated).
GDN_HD void chunk_out(const RuleArgs& a, const Chunk& c, int idx) {
  const int t = idx / kRuleCols, col = idx % kRuleCols, j = c.tile * kRuleCols + col;
  float qS = 0.0f;
  for (int i = 0; i < c.dk; ++i) qS = fma_f32(bf16_to_f32(c.Q[t * c.kst + i]), c.S[i * kRuleCols + col], qS);
  float o = mul_rn(mul_rn(qS, a.qscale), c.eG[t]);
  for (int s = 0; s <= t; ++s) o = fma_f32(c.QK[t * kGdnChunk + s], c.V[s * kRuleCols + col], o);
  if (j < a.dv) a.out[(c.t0 + t) * a.ldo + static_cast<int64_t>(c.h) * a.dv + j] = f32_to_bf16(o);
}

// Phase 6 (idx < dk * kRuleCols): the state after the chunk.
GDN_HD void chunk_state(const Chunk& c, int idx) {
  const int i = idx / kRuleCols, col = idx % kRuleCols;
  float acc = mul_rn(c.eG[c.L - 1], c.S[idx]);
  for (int s = 0; s < c.L; ++s)
    acc = fma_f32(mul_rn(bf16_to_f32(c.K[s * c.kst + i]), c.eL[s]), c.V[s * kRuleCols + col], acc);
  c.S[idx] = acc;
}

}  // namespace fp4serve::kernels::cuda::gdn_chunked
