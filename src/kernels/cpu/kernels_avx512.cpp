// AVX-512 (F/BW/VL/DQ) variants of the primitives in kernel_table.h. Same operation order as
// kernels_scalar.cpp: 32 dot lanes = two zmm accumulators per output, the same halving tree, and
// per-element fma sequences for the element-wise primitives. Compiled with AVX-512 flags only;
// called only when cpu_features() says the CPU has them. Helpers shared with the other ISA files
// are simd_formats.h's and simd_avx512.h's.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/dequant_scalar.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_formats.h"

namespace fp4serve::kernels::cpu {
namespace {

// Canonical tree: lanes (i, i+16) of the two accumulators, then halves of 16, 8, 4, 2.
inline float reduce32(__m512 a0, __m512 a1) { return reduce16(_mm512_add_ps(a0, a1)); }

inline __m512 bf16x16_to_f32(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

// W(n, k0 .. k0+31) for a full chunk (k0 + 32 <= K), bit-identical to dequant_chunk32.
inline void dequant32(const WeightView& w, int64_t n, int64_t k0, __m512* w0, __m512* w1) {
  switch (w.format) {
    case WeightLayout::kBf16: {
      const uint16_t* p = natural_elems<uint16_t>(w, n, k0);
      *w0 = bf16x16_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      *w1 = bf16x16_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)));
      return;
    }
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kFp8Block: {
      const uint8_t* p = natural_elems<uint8_t>(w, n, k0);
      *w0 = e4m3x16_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      *w1 = e4m3x16_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
      if (w.format == WeightLayout::kFp8Block) {
        const __m512 vs = _mm512_set1_ps(fp8_block_scale(w, n, k0));
        *w0 = _mm512_mul_ps(*w0, vs);
        *w1 = _mm512_mul_ps(*w1, vs);
      }
      return;
    }
    case WeightLayout::kNvfp4: {
      __m128i a, b;
      float s[2];
      nvfp4_chunk32(w, n, k0, &a, &b, s);
      *w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(a)), _mm512_set1_ps(s[0]));
      *w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), _mm512_set1_ps(s[1]));
      return;
    }
    case WeightLayout::kInt4Packed: {
      __m128i a, b;
      const __m512 vs = _mm512_set1_ps(int4_chunk32(w, n, k0, &a, &b));
      *w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(a)), vs);
      *w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), vs);
      return;
    }
    case WeightLayout::kInt4Gptq:
      break;
  }
  alignas(64) float buf[32];
  dequant_chunk32(w, n, k0, buf);
  *w0 = _mm512_load_ps(buf);
  *w1 = _mm512_load_ps(buf + 16);
}

// MT activation rows against one weight row. Weights come either from `wrow` (a dequantized row,
// K padded to 32 with zeros) or are dequantized on the fly.
template <int MT>
inline void tile(const float* x, int64_t ldx, const WeightView& w, int64_t n, const float* wrow, float* y,
                 int64_t ldy) {
  const int64_t K = w.k;
  const int64_t kfull = K & ~int64_t{31};
  __m512 acc0[MT], acc1[MT];
  for (int j = 0; j < MT; ++j) acc0[j] = acc1[j] = _mm512_setzero_ps();
  const bool fused = wrow == nullptr;
  for (int64_t k0 = 0; k0 < kfull; k0 += 32) {
    __m512 w0, w1;
    if (fused) {
      dequant32(w, n, k0, &w0, &w1);
    } else {
      w0 = _mm512_loadu_ps(wrow + k0);
      w1 = _mm512_loadu_ps(wrow + k0 + 16);
    }
    for (int j = 0; j < MT; ++j) {
      acc0[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + j * ldx + k0), w0, acc0[j]);
      acc1[j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + j * ldx + k0 + 16), w1, acc1[j]);
    }
  }
  if (kfull < K) {  // zero-padded last chunk: adds exact zeros to the lanes past K
    alignas(64) float wb[32];
    if (fused) {
      dequant_chunk32(w, n, kfull, wb);
    } else {
      for (int i = 0; i < 32; ++i) wb[i] = wrow[kfull + i];
    }
    const __mmask16 m0 = first_lanes16(K - kfull), m1 = first_lanes16(K - kfull - 16);
    const __m512 w0 = _mm512_load_ps(wb), w1 = _mm512_load_ps(wb + 16);
    for (int j = 0; j < MT; ++j) {
      acc0[j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, x + j * ldx + kfull), w0, acc0[j]);
      acc1[j] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, x + j * ldx + kfull + 16), w1, acc1[j]);
    }
  }
  for (int j = 0; j < MT; ++j) y[j * ldy + n] = reduce32(acc0[j], acc1[j]) * w.tensor_scale;
}

// NVFP4 fast path for M <= 4. Nibbles become weights with one two-table permute from the
// per-scale product LUT (e2m1 * e4m3, exact), but in de-interleaved order: accumulator 0 holds the
// even k of each 32-chunk, accumulator 1 the odd k. So canonical lane c = 2i + p lives in lane i of
// accumulator p, the x rows are de-interleaved the same way once per call, and the reduction tree
// below adds exactly the canonical pairs (c, c+16), (c, c+8), ... in that layout.
inline float reduce32_deinterleaved(__m512 even, __m512 odd) { return reduce16(even) + reduce16(odd); }

// xd[kpad]: x with each 32-chunk reordered to (k0, k0+2, ..., k0+30, k0+1, ..., k0+31), zero padded.
inline void deinterleave_x(const float* x, int64_t K, float* xd) {
  const int64_t kpad = (K + 31) & ~int64_t{31};
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
  for (int64_t k0 = 0; k0 < kpad; k0 += 32) {
    const __mmask16 m0 = first_lanes16(K - k0), m1 = first_lanes16(K - k0 - 16);
    const __m512 a = _mm512_maskz_loadu_ps(m0, x + k0), b = _mm512_maskz_loadu_ps(m1, x + k0 + 16);
    _mm512_storeu_ps(xd + k0, _mm512_permutex2var_ps(a, ie, b));
    _mm512_storeu_ps(xd + k0 + 16, _mm512_permutex2var_ps(a, io, b));
  }
}

// MT activation rows (up to 8) against one weight row; each 32-chunk of weights is dequantized
// once in registers and used by all MT rows.
template <int MT>
inline void tile_nvfp4(const float* xd, int64_t ldxd, const WeightView& w, int64_t n, float* y, int64_t ldy) {
  const int64_t K = w.k;
  const int64_t kfull = K & ~int64_t{31};
  const uint8_t* p = nibble_bytes(w, n, 0);
  const uint8_t* sc = nvfp4_scale_codes(w, n, 0);
  const float* lut = nvfp4_product_lut();
  const __m512i sel = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);
  const __m512i low4 = _mm512_set1_epi32(0x0F);
  __m512 acc0[MT], acc1[MT];
  for (int j = 0; j < MT; ++j) acc0[j] = acc1[j] = _mm512_setzero_ps();
  for (int64_t k0 = 0; k0 < kfull; k0 += 32) {
    const __m512i zx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + k0 / 2)));
    const __m512 lut0 = _mm512_load_ps(lut + 16 * sc[k0 / 16]);
    const __m512 lut1 = _mm512_load_ps(lut + 16 * sc[k0 / 16 + 1]);
    const __m512i ie = _mm512_ternarylogic_epi32(zx, low4, sel, 0xEA);  // (zx & low4) | sel
    const __m512i io = _mm512_or_si512(_mm512_srli_epi32(zx, 4), sel);
    const __m512 we = _mm512_permutex2var_ps(lut0, ie, lut1);
    const __m512 wo = _mm512_permutex2var_ps(lut0, io, lut1);
    for (int j = 0; j < MT; ++j) {
      acc0[j] = _mm512_fmadd_ps(_mm512_loadu_ps(xd + j * ldxd + k0), we, acc0[j]);
      acc1[j] = _mm512_fmadd_ps(_mm512_loadu_ps(xd + j * ldxd + k0 + 16), wo, acc1[j]);
    }
  }
  if (kfull < K) {  // K % 32 == 16: one half chunk, de-interleaved by hand, zeros beyond K
    alignas(64) float wb[32], wd[32];
    dequant_chunk32(w, n, kfull, wb);
    for (int i = 0; i < 16; ++i) {
      wd[i] = wb[2 * i];
      wd[16 + i] = wb[2 * i + 1];
    }
    const __m512 we = _mm512_load_ps(wd), wo = _mm512_load_ps(wd + 16);
    for (int j = 0; j < MT; ++j) {
      acc0[j] = _mm512_fmadd_ps(_mm512_loadu_ps(xd + j * ldxd + kfull), we, acc0[j]);
      acc1[j] = _mm512_fmadd_ps(_mm512_loadu_ps(xd + j * ldxd + kfull + 16), wo, acc1[j]);
    }
  }
  for (int j = 0; j < MT; ++j) y[j * ldy + n] = reduce32_deinterleaved(acc0[j], acc1[j]) * w.tensor_scale;
}

// x de-interleaved once per call into scratch rows 1..M, then groups of up to 8 rows.
void nvfp4_rows(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                int64_t ldy, float* scratch) {
  const int64_t kpad = (w.k + 31) & ~int64_t{31};
  float* xd = scratch + kpad;
  for (int64_t m = 0; m < M; ++m) deinterleave_x(x + m * ldx, w.k, xd + m * kpad);
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t m0 = 0; m0 < M; m0 += 8) {
      const float* xg = xd + m0 * kpad;
      float* yg = y + m0 * ldy;
      switch (std::min<int64_t>(8, M - m0)) {
        case 8: tile_nvfp4<8>(xg, kpad, w, n, yg, ldy); break;
        case 7: tile_nvfp4<7>(xg, kpad, w, n, yg, ldy); break;
        case 6: tile_nvfp4<6>(xg, kpad, w, n, yg, ldy); break;
        case 5: tile_nvfp4<5>(xg, kpad, w, n, yg, ldy); break;
        case 4: tile_nvfp4<4>(xg, kpad, w, n, yg, ldy); break;
        case 3: tile_nvfp4<3>(xg, kpad, w, n, yg, ldy); break;
        case 2: tile_nvfp4<2>(xg, kpad, w, n, yg, ldy); break;
        default: tile_nvfp4<1>(xg, kpad, w, n, yg, ldy); break;
      }
    }
  }
}

void linear_avx512(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                   int64_t ldy, float* scratch) {
  const int64_t K = w.k;
  const int64_t kpad = (K + 31) & ~int64_t{31};
  // NVFP4 up to 8 rows: LUT dequant in registers shared by the rows. Larger M: dequantize each
  // weight row once into scratch and reuse it (measured faster at M = 64 on Zen 4).
  if (M >= 1 && M <= 8 && w.format == WeightLayout::kNvfp4) {
    nvfp4_rows(x, M, ldx, w, n0, n1, y, ldy, scratch);
    return;
  }
  const bool fused = M <= 4 && vector_format(w);
  for (int64_t n = n0; n < n1; ++n) {
    const float* wrow = nullptr;
    if (!fused) {  // dequantize the row once, reuse it for all M rows
      for (int64_t k0 = 0; k0 < kpad; k0 += 32) {
        if (k0 + 32 <= K && vector_format(w)) {
          __m512 w0, w1;
          dequant32(w, n, k0, &w0, &w1);
          _mm512_storeu_ps(scratch + k0, w0);
          _mm512_storeu_ps(scratch + k0 + 16, w1);
        } else {
          dequant_chunk32(w, n, k0, scratch + k0);
        }
      }
      wrow = scratch;
    }
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) tile<4>(x + m * ldx, ldx, w, n, wrow, y + m * ldy, ldy);
    switch (M - m) {
      case 3:
        tile<3>(x + m * ldx, ldx, w, n, wrow, y + m * ldy, ldy);
        break;
      case 2:
        tile<2>(x + m * ldx, ldx, w, n, wrow, y + m * ldy, ldy);
        break;
      case 1:
        tile<1>(x + m * ldx, ldx, w, n, wrow, y + m * ldy, ldy);
        break;
      default:
        break;
    }
  }
}

float dot_avx512(const float* a, const float* b, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(b + k + 16), acc1);
  }
  if (k < n) {
    const __mmask16 m0 = first_lanes16(n - k), m1 = first_lanes16(n - k - 16);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, a + k), _mm512_maskz_loadu_ps(m0, b + k), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, a + k + 16), _mm512_maskz_loadu_ps(m1, b + k + 16), acc1);
  }
  return reduce32(acc0, acc1);
}

void axpy_avx512(float a, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = first_lanes16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

void fma_rows_avx512(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = first_lanes16(n - i);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i),
                                          _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// Four keys per pass: the same per-key sequence as dot_avx512 (two 16-lane accumulators over
// 32-chunks, masked tail, reduce32), with q's chunk loaded once for the four.
void dots_avx512(const float* q, const float* K, int64_t ldk, int64_t L, int64_t n, float* out) {
  int64_t j = 0;
  for (; j + 4 <= L; j += 4) {
    __m512 a0[4], a1[4];
    for (int u = 0; u < 4; ++u) a0[u] = a1[u] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= n; k += 32) {
      const __m512 q0 = _mm512_loadu_ps(q + k), q1 = _mm512_loadu_ps(q + k + 16);
      for (int u = 0; u < 4; ++u) {
        const float* kr = K + (j + u) * ldk + k;
        a0[u] = _mm512_fmadd_ps(q0, _mm512_loadu_ps(kr), a0[u]);
        a1[u] = _mm512_fmadd_ps(q1, _mm512_loadu_ps(kr + 16), a1[u]);
      }
    }
    if (k < n) {
      const __mmask16 m0 = first_lanes16(n - k), m1 = first_lanes16(n - k - 16);
      const __m512 q0 = _mm512_maskz_loadu_ps(m0, q + k), q1 = _mm512_maskz_loadu_ps(m1, q + k + 16);
      for (int u = 0; u < 4; ++u) {
        const float* kr = K + (j + u) * ldk + k;
        a0[u] = _mm512_fmadd_ps(q0, _mm512_maskz_loadu_ps(m0, kr), a0[u]);
        a1[u] = _mm512_fmadd_ps(q1, _mm512_maskz_loadu_ps(m1, kr + 16), a1[u]);
      }
    }
    for (int u = 0; u < 4; ++u) out[j + u] = reduce32(a0[u], a1[u]);
  }
  for (; j < L; ++j) out[j] = dot_avx512(q, K + j * ldk, n);
}

// acc stays in up to 16 registers (256 floats) across all j; wider rows go in 256-column slices,
// each element's fma chain over j unchanged.
void weighted_sum_avx512(const float* p, const float* V, int64_t ldv, int64_t L, int64_t n, float* acc) {
  for (int64_t c0 = 0; c0 < n; c0 += 256) {
    const int64_t w = std::min<int64_t>(256, n - c0);
    const int regs = static_cast<int>((w + 15) / 16);
    const int64_t tail = w - 16 * (regs - 1);
    const __mmask16 last = first_lanes16(tail);
    __m512 a[16];
    for (int r = 0; r < regs; ++r) a[r] = _mm512_maskz_loadu_ps(r + 1 < regs ? 0xFFFF : last, acc + c0 + 16 * r);
    for (int64_t j = 0; j < L; ++j) {
      const __m512 pj = _mm512_set1_ps(p[j]);
      const float* vr = V + j * ldv + c0;
      if (regs == 16) {
        #pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) a[r] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vr + 16 * r), a[r]);
      } else {
        for (int r = 0; r < regs; ++r)
          a[r] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(r + 1 < regs ? 0xFFFF : last, vr + 16 * r), a[r]);
      }
    }
    for (int r = 0; r < regs; ++r) _mm512_mask_storeu_ps(acc + c0 + 16 * r, r + 1 < regs ? 0xFFFF : last, a[r]);
  }
}

// The first half of a delta-rule step for dv = 128: S = S * decay row by row, kvm = sum_i S[i] k[i]
// (fma chain over i from +0).
inline void decay_and_project(float* S, const float* k, float decay, int dk, __m512 kvm[8]) {
  const __m512 vdecay = _mm512_set1_ps(decay);
  for (int j = 0; j < 8; ++j) kvm[j] = _mm512_setzero_ps();
  for (int i = 0; i < dk; ++i) {
    float* row = S + static_cast<int64_t>(i) * 128;
    const __m512 ki = _mm512_set1_ps(k[i]);
    for (int j = 0; j < 8; ++j) {
      const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(row + 16 * j), vdecay);
      _mm512_storeu_ps(row + 16 * j, s);
      kvm[j] = _mm512_fmadd_ps(s, ki, kvm[j]);
    }
  }
}

void gdn_step_avx512(float* S, const float* q, const float* k, const float* v, float decay, float beta, int dk,
                     int dv, float* out, float* kvm) {
  if (dv != 128) {  // the model's head size; other sizes take the reference path
    scalar_kernels().gdn_step(S, q, k, v, decay, beta, dk, dv, out, kvm);
    return;
  }
  __m512 acc[8];
  decay_and_project(S, k, decay, dk, acc);
  const __m512 vbeta = _mm512_set1_ps(beta);
  __m512 d[8];
  for (int j = 0; j < 8; ++j) {
    d[j] = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + 16 * j), acc[j]), vbeta);
    acc[j] = _mm512_setzero_ps();
  }
  for (int i = 0; i < dk; ++i) {
    float* row = S + static_cast<int64_t>(i) * 128;
    const __m512 ki = _mm512_set1_ps(k[i]);
    const __m512 qi = _mm512_set1_ps(q[i]);
    for (int j = 0; j < 8; ++j) {
      const __m512 s = _mm512_fmadd_ps(ki, d[j], _mm512_loadu_ps(row + 16 * j));
      _mm512_storeu_ps(row + 16 * j, s);
      acc[j] = _mm512_fmadd_ps(s, qi, acc[j]);
    }
  }
  for (int j = 0; j < 8; ++j) _mm512_storeu_ps(out + 16 * j, acc[j]);
}

// T tokens of one head with dv = 128, ONE sweep over S per token: the update and output of token
// t (S = fma(k_t, d_t, S); out_t += S q_t) and the decay and k-projection of token t+1
// (S = S * decay_{t+1}; kvm += S k_{t+1}) share the load and store of each row. Per element the
// operations and their order are gdn_step's; the rows' sums over i run in the same i order.
void gdn_tokens_avx512(float* S, const float* q, int64_t tq, const float* k, int64_t tk, const float* v, int64_t tv,
                       const float* decay, const float* beta, int64_t T, int dk, int dv, float* out, int64_t tout,
                       float* scratch) {
  if (dv != 128 || T <= 0) {
    gdn_tokens_by_step(gdn_step_avx512, S, q, tq, k, tk, v, tv, decay, beta, T, dk, dv, out, tout, scratch);
    return;
  }
  __m512 kvm[8];  // sum_i S[i] k_t[i] for the token whose delta comes next
  decay_and_project(S, k, decay[0], dk, kvm);  // token 0's decay and k-projection alone
  for (int64_t t = 0; t < T; ++t) {
    const float* kt = k + t * tk;
    const float* qt = q + t * tq;
    const __m512 vbeta = _mm512_set1_ps(beta[t]);
    __m512 d[8], acc[8];
    for (int j = 0; j < 8; ++j) {
      d[j] = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + t * tv + 16 * j), kvm[j]), vbeta);
      acc[j] = _mm512_setzero_ps();
      kvm[j] = _mm512_setzero_ps();
    }
    const bool next = t + 1 < T;
    const float* kn = k + (t + 1) * tk;
    const __m512 vdecay = _mm512_set1_ps(next ? decay[t + 1] : 1.0f);
    for (int i = 0; i < dk; ++i) {
      float* row = S + static_cast<int64_t>(i) * 128;
      const __m512 ki = _mm512_set1_ps(kt[i]);
      const __m512 qi = _mm512_set1_ps(qt[i]);
      const __m512 kni = _mm512_set1_ps(next ? kn[i] : 0.0f);
      for (int j = 0; j < 8; ++j) {
        __m512 s = _mm512_fmadd_ps(ki, d[j], _mm512_loadu_ps(row + 16 * j));
        acc[j] = _mm512_fmadd_ps(s, qi, acc[j]);
        if (next) {
          s = _mm512_mul_ps(s, vdecay);
          kvm[j] = _mm512_fmadd_ps(s, kni, kvm[j]);
        }
        _mm512_storeu_ps(row + 16 * j, s);
      }
    }
    for (int j = 0; j < 8; ++j) _mm512_storeu_ps(out + t * tout + 16 * j, acc[j]);
  }
}

}  // namespace

const KernelTable& avx512_kernels() {
  static const KernelTable t{linear_avx512,       dot_avx512,      axpy_avx512,      dots_avx512, fma_rows_avx512,
                             weighted_sum_avx512, gdn_step_avx512, gdn_tokens_avx512};
  return t;
}

}  // namespace fp4serve::kernels::cpu
