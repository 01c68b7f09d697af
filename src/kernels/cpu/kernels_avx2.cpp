// AVX2+FMA+F16C variants of the primitives in kernel_table.h. Same operation order as
// kernels_scalar.cpp: the 32 dot lanes are four ymm accumulators (lanes 0-7, 8-15, 16-23, 24-31),
// reduced by the same halving tree. Compiled with AVX2 flags only. Helpers shared with the other
// ISA files are simd_formats.h's and simd_avx2.h's.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/dequant_scalar.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_formats.h"

namespace fp4serve::kernels::cpu {
namespace {

struct Acc {
  __m256 a[4];
};

// (i, i+16) first: a0+a2 gives lanes 0-7 of h16, a1+a3 lanes 8-15; then the halves.
inline float reduce32(const Acc& c) {
  __m256 h0 = _mm256_add_ps(c.a[0], c.a[2]);
  __m256 h1 = _mm256_add_ps(c.a[1], c.a[3]);
  return reduce8(_mm256_add_ps(h0, h1));
}

// 8 e4m3 bytes -> fp32 (the fp16 trick of simd_avx512.h e4m3x16_to_f32, at half the width).
inline __m256 e4m3x8_to_f32(const uint8_t* p) {
  __m128i b = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  __m128i mag = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x7F)), 7);
  __m128i sign = _mm_slli_epi16(_mm_and_si128(b, _mm_set1_epi16(0x80)), 8);
  return _mm256_mul_ps(_mm256_cvtph_ps(_mm_or_si128(mag, sign)), _mm256_set1_ps(256.0f));
}

inline __m256 bf16x8_to_f32(const uint16_t* p) {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

inline __m256 i8x8_to_f32(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

// W(n, k0 .. k0+31) for a full chunk, bit-identical to dequant_chunk32.
inline void dequant32(const WeightView& w, int64_t n, int64_t k0, __m256 out[4]) {
  switch (w.format) {
    case WeightLayout::kBf16: {
      const uint16_t* p = natural_elems<uint16_t>(w, n, k0);
      for (int i = 0; i < 4; ++i) out[i] = bf16x8_to_f32(p + 8 * i);
      return;
    }
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kFp8Block: {
      const uint8_t* p = natural_elems<uint8_t>(w, n, k0);
      for (int i = 0; i < 4; ++i) out[i] = e4m3x8_to_f32(p + 8 * i);
      if (w.format == WeightLayout::kFp8Block) {
        const __m256 vs = _mm256_set1_ps(fp8_block_scale(w, n, k0));
        for (int i = 0; i < 4; ++i) out[i] = _mm256_mul_ps(out[i], vs);
      }
      return;
    }
    case WeightLayout::kNvfp4: {
      __m128i a, b;
      float s[2];
      nvfp4_chunk32(w, n, k0, &a, &b, s);
      const __m256 s0 = _mm256_set1_ps(s[0]), s1 = _mm256_set1_ps(s[1]);
      out[0] = _mm256_mul_ps(i8x8_to_f32(a), s0);
      out[1] = _mm256_mul_ps(i8x8_to_f32(_mm_srli_si128(a, 8)), s0);
      out[2] = _mm256_mul_ps(i8x8_to_f32(b), s1);
      out[3] = _mm256_mul_ps(i8x8_to_f32(_mm_srli_si128(b, 8)), s1);
      return;
    }
    case WeightLayout::kInt4Packed: {
      __m128i a, b;
      const __m256 vs = _mm256_set1_ps(int4_chunk32(w, n, k0, &a, &b));
      out[0] = _mm256_mul_ps(i8x8_to_f32(a), vs);
      out[1] = _mm256_mul_ps(i8x8_to_f32(_mm_srli_si128(a, 8)), vs);
      out[2] = _mm256_mul_ps(i8x8_to_f32(b), vs);
      out[3] = _mm256_mul_ps(i8x8_to_f32(_mm_srli_si128(b, 8)), vs);
      return;
    }
    case WeightLayout::kInt4Gptq:
      break;
  }
  alignas(32) float buf[32];
  dequant_chunk32(w, n, k0, buf);
  for (int i = 0; i < 4; ++i) out[i] = _mm256_load_ps(buf + 8 * i);
}

inline __m256i tail_mask(int64_t remaining) {  // lanes < remaining set
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(remaining < 8 ? remaining : 8)), idx);
}

template <int MT>
inline void tile(const float* x, int64_t ldx, const WeightView& w, int64_t n, const float* wrow, float* y,
                 int64_t ldy) {
  const int64_t K = w.k;
  const int64_t kfull = K & ~int64_t{31};
  Acc acc[MT];
  for (int j = 0; j < MT; ++j)
    for (int i = 0; i < 4; ++i) acc[j].a[i] = _mm256_setzero_ps();
  const bool fused = wrow == nullptr;
  for (int64_t k0 = 0; k0 < kfull; k0 += 32) {
    __m256 wv[4];
    if (fused) {
      dequant32(w, n, k0, wv);
    } else {
      for (int i = 0; i < 4; ++i) wv[i] = _mm256_loadu_ps(wrow + k0 + 8 * i);
    }
    for (int j = 0; j < MT; ++j)
      for (int i = 0; i < 4; ++i)
        acc[j].a[i] = _mm256_fmadd_ps(_mm256_loadu_ps(x + j * ldx + k0 + 8 * i), wv[i], acc[j].a[i]);
  }
  if (kfull < K) {
    alignas(32) float wb[32];
    if (fused) {
      dequant_chunk32(w, n, kfull, wb);
    } else {
      for (int i = 0; i < 32; ++i) wb[i] = wrow[kfull + i];
    }
    for (int i = 0; i < 4; ++i) {
      const int64_t rem = K - kfull - 8 * i;
      if (rem <= 0) break;
      const __m256i m = tail_mask(rem);
      const __m256 wv = _mm256_load_ps(wb + 8 * i);
      for (int j = 0; j < MT; ++j)
        acc[j].a[i] = _mm256_fmadd_ps(_mm256_maskload_ps(x + j * ldx + kfull + 8 * i, m), wv, acc[j].a[i]);
    }
  }
  for (int j = 0; j < MT; ++j) y[j * ldy + n] = reduce32(acc[j]) * w.tensor_scale;
}

void linear_avx2(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                 int64_t ldy, float* scratch) {
  const int64_t K = w.k;
  const int64_t kpad = (K + 31) & ~int64_t{31};
  const bool fused = M <= 2 && vector_format(w);
  for (int64_t n = n0; n < n1; ++n) {
    const float* wrow = nullptr;
    if (!fused) {
      for (int64_t k0 = 0; k0 < kpad; k0 += 32) {
        if (k0 + 32 <= K && vector_format(w)) {
          __m256 wv[4];
          dequant32(w, n, k0, wv);
          for (int i = 0; i < 4; ++i) _mm256_storeu_ps(scratch + k0 + 8 * i, wv[i]);
        } else {
          dequant_chunk32(w, n, k0, scratch + k0);
        }
      }
      wrow = scratch;
    }
    int64_t m = 0;
    for (; m + 2 <= M; m += 2) tile<2>(x + m * ldx, ldx, w, n, wrow, y + m * ldy, ldy);
    if (m < M) tile<1>(x + m * ldx, ldx, w, n, wrow, y + m * ldy, ldy);
  }
}

float dot_avx2(const float* a, const float* b, int64_t n) {
  Acc acc;
  for (int i = 0; i < 4; ++i) acc.a[i] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= n; k += 32)
    for (int i = 0; i < 4; ++i)
      acc.a[i] = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8 * i), _mm256_loadu_ps(b + k + 8 * i), acc.a[i]);
  for (int i = 0; i < 4 && k + 8 * i < n; ++i) {
    const __m256i m = tail_mask(n - k - 8 * i);
    acc.a[i] = _mm256_fmadd_ps(_mm256_maskload_ps(a + k + 8 * i, m), _mm256_maskload_ps(b + k + 8 * i, m), acc.a[i]);
  }
  return reduce32(acc);
}

void axpy_avx2(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = __builtin_fmaf(a, x[i], y[i]);
}

void gdn_step_avx2(float* S, const float* q, const float* k, const float* v, float decay, float beta, int dk, int dv,
                   float* out, float* kvm) {
  if (dv % 32 != 0) {
    scalar_kernels().gdn_step(S, q, k, v, decay, beta, dk, dv, out, kvm);
    return;
  }
  const __m256 vdecay = _mm256_set1_ps(decay);
  const __m256 vbeta = _mm256_set1_ps(beta);
  // 32 columns at a time keep 4 kvm and 4 out accumulators in registers.
  for (int c = 0; c < dv; c += 32) {
    __m256 acc[4];
    for (int j = 0; j < 4; ++j) acc[j] = _mm256_setzero_ps();
    for (int i = 0; i < dk; ++i) {
      float* row = S + static_cast<int64_t>(i) * dv + c;
      const __m256 ki = _mm256_set1_ps(k[i]);
      for (int j = 0; j < 4; ++j) {
        const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(row + 8 * j), vdecay);
        _mm256_storeu_ps(row + 8 * j, s);
        acc[j] = _mm256_fmadd_ps(s, ki, acc[j]);
      }
    }
    __m256 d[4];
    for (int j = 0; j < 4; ++j) {
      d[j] = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + c + 8 * j), acc[j]), vbeta);
      acc[j] = _mm256_setzero_ps();
    }
    for (int i = 0; i < dk; ++i) {
      float* row = S + static_cast<int64_t>(i) * dv + c;
      const __m256 ki = _mm256_set1_ps(k[i]);
      const __m256 qi = _mm256_set1_ps(q[i]);
      for (int j = 0; j < 4; ++j) {
        const __m256 s = _mm256_fmadd_ps(ki, d[j], _mm256_loadu_ps(row + 8 * j));
        _mm256_storeu_ps(row + 8 * j, s);
        acc[j] = _mm256_fmadd_ps(s, qi, acc[j]);
      }
    }
    for (int j = 0; j < 4; ++j) _mm256_storeu_ps(out + c + 8 * j, acc[j]);
  }
}

void fma_rows_avx2(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] = std::fma(a[i], b[i], y[i]);
}

void gdn_tokens_avx2(float* S, const float* q, int64_t tq, const float* k, int64_t tk, const float* v, int64_t tv,
                     const float* decay, const float* beta, int64_t T, int dk, int dv, float* out, int64_t tout,
                     float* scratch) {
  gdn_tokens_by_step(gdn_step_avx2, S, q, tq, k, tk, v, tv, decay, beta, T, dk, dv, out, tout, scratch);
}

void dots_avx2(const float* q, const float* K, int64_t ldk, int64_t L, int64_t n, float* out) {
  dots_by_dot(dot_avx2, q, K, ldk, L, n, out);
}
void weighted_sum_avx2(const float* p, const float* V, int64_t ldv, int64_t L, int64_t n, float* acc) {
  weighted_sum_by_axpy(axpy_avx2, p, V, ldv, L, n, acc);
}

}  // namespace

const KernelTable& avx2_kernels() {
  static const KernelTable t{linear_avx2,       dot_avx2,      axpy_avx2,      dots_avx2, fma_rows_avx2,
                             weighted_sum_avx2, gdn_step_avx2, gdn_tokens_avx2};
  return t;
}

}  // namespace fp4serve::kernels::cpu
