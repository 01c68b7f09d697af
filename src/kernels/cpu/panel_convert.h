// Conversions shared by the panel kernels (linear_panels_*.cpp): one "octet" of a packed panel
// (packed_weight.h: 16 rows x 8 k) -> four zmm "pair rows" of bf16 in VNNI order (dword i = row i's
// pair k 2r, 2r+1), block scales -> fp32, and x rows -> bf16. Everything here has internal linkage
// on purpose: each including file is compiled for its own ISA (AVX512-BF16 + VBMI, or AMX), and an
// inline function with external linkage could be merged by the linker into a copy built for
// another one. Helpers shared with the other AVX-512 files are simd_avx512.h's.
#pragma once

#if !defined(__AVX512BF16__) || !defined(__AVX512VBMI__) || !defined(__AVX512BW__)
#error "panel_convert.h needs AVX512-BF16, AVX512-VBMI and AVX512-BW (a *_avx512bf16vbmi.cpp or *_amx.cpp file)"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_formats.h"
#include "kernels/cpu/packed_weight.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels::cpu {
namespace {  // NOLINT(google-build-namespaces): internal linkage per including ISA file, see above

// e4m3 magnitude code (7 bits) -> low / high byte of its exact bf16 (the sign is ORed in later).
struct Fp8ByteTables {
  alignas(64) uint8_t lo[128];
  alignas(64) uint8_t hi[128];
  Fp8ByteTables() {
    for (int c = 0; c < 128; ++c) {
      const uint16_t b = f32_to_bf16(e4m3_to_f32(static_cast<uint8_t>(c)));
      lo[c] = static_cast<uint8_t>(b & 0xFF);
      hi[c] = static_cast<uint8_t>(b >> 8);
    }
  }
};
inline const Fp8ByteTables& fp8_byte_tables() {
  static const Fp8ByteTables t;
  return t;
}

// Octet o of a panel (k 8o .. 8o+7) -> its four pair rows r[t] = pair row 4o + t, per format.
struct PanelBf16 {
  FP4SERVE_INLINE void octet(const uint8_t* panel, int64_t o, __m512i r[4]) const {
    for (int t = 0; t < 4; ++t) r[t] = _mm512_load_si512(panel + 256 * o + 64 * t);
  }
  FP4SERVE_INLINE static const uint8_t* octet_bytes(const uint8_t* panel, int64_t o) { return panel + 256 * o; }
};

struct PanelFp8 {
  __m512i lo0, lo1, hi0, hi1, sign;
  PanelFp8() {
    const Fp8ByteTables& t = fp8_byte_tables();
    lo0 = _mm512_load_si512(t.lo);
    lo1 = _mm512_load_si512(t.lo + 64);
    hi0 = _mm512_load_si512(t.hi);
    hi1 = _mm512_load_si512(t.hi + 64);
    sign = _mm512_set1_epi8(static_cast<char>(0x80));
  }
  // One quad (64 bytes, k 4q .. 4q+3) -> pair rows 2q, 2q+1.
  FP4SERVE_INLINE void quad(const uint8_t* p, __m512i* e, __m512i* o) const {
    const __m512i v = _mm512_load_si512(p);
    const __m512i lb = _mm512_permutex2var_epi8(lo0, v, lo1);  // index bits 6:0, bit 6 picks the table
    __m512i hb = _mm512_permutex2var_epi8(hi0, v, hi1);
    hb = _mm512_ternarylogic_epi32(hb, v, sign, 0xF8);  // hb | (v & 0x80)
    *e = _mm512_unpacklo_epi8(lb, hb);  // in-lane interleave: the panel's byte order makes these
    *o = _mm512_unpackhi_epi8(lb, hb);  // the pair rows 2q and 2q+1
  }
  FP4SERVE_INLINE void octet(const uint8_t* panel, int64_t o, __m512i r[4]) const {
    quad(panel + 128 * o, &r[0], &r[1]);
    quad(panel + 128 * o + 64, &r[2], &r[3]);
  }
  FP4SERVE_INLINE static const uint8_t* octet_bytes(const uint8_t* panel, int64_t o) { return panel + 128 * o; }
};

struct PanelNvfp4 {
  __m512i table;  // the 16 e2m1 values twice: VPERMW reads 5 index bits, bit 4 is a neighbour's
  PanelNvfp4() {
    alignas(64) uint16_t t[32];
    for (int i = 0; i < 32; ++i) t[i] = kE2m1Bf16[i % 16];
    table = _mm512_load_si512(t);
  }
  FP4SERVE_INLINE static const uint8_t* octet_bytes(const uint8_t* panel, int64_t o) {
    return panel + 576 * (o / 8) + 64 + 64 * (o % 8);
  }
  FP4SERVE_INLINE void octet(const uint8_t* panel, int64_t o, __m512i r[4]) const {
    const __m512i w = _mm512_load_si512(octet_bytes(panel, o));
    r[0] = _mm512_permutexvar_epi16(w, table);
    r[1] = _mm512_permutexvar_epi16(_mm512_srli_epi16(w, 4), table);
    r[2] = _mm512_permutexvar_epi16(_mm512_srli_epi16(w, 8), table);
    r[3] = _mm512_permutexvar_epi16(_mm512_srli_epi16(w, 12), table);
  }
  // The 16 rows' scales of the 16-k block b.
  FP4SERVE_INLINE static __m512 block_scale(const uint8_t* panel, int64_t b) {
    const uint8_t* s = panel + 576 * (b / 4) + 16 * (b % 4);
    return e4m3x16_to_f32(_mm_load_si128(reinterpret_cast<const __m128i*>(s)));
  }
  // The same for a panel whose scales are all positive normal codes (PackedWeight::normal_scales):
  // the 7 bits under the fp32 exponent boundary, exponent rebased by 127 - 7. Same values.
  FP4SERVE_INLINE static __m512 block_scale_normal(const uint8_t* panel, int64_t b) {
    const uint8_t* s = panel + 576 * (b / 4) + 16 * (b % 4);
    const __m512i d = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(s)));
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(d, 20), _mm512_set1_epi32(120 << 23)));
  }
  FP4SERVE_INLINE static __m512 block_scale(const uint8_t* panel, int64_t b, bool normal) {
    return normal ? block_scale_normal(panel, b) : block_scale(panel, b);
  }
};

// x rows [M, ldx] fp32 -> bf16 rows of kp elements (RNE), zero past K. xb 64-byte aligned.
inline void panel_prepare_x(const float* x, int64_t M, int64_t ldx, int64_t K, int64_t kp, uint16_t* xb) {
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    uint16_t* out = xb + m * kp;
    for (int64_t k0 = 0; k0 < kp; k0 += 32) {
      const __mmask16 m0 = first_lanes16(K - k0), m1 = first_lanes16(K - k0 - 16);
      const __m512 a = _mm512_maskz_loadu_ps(m0, xr + k0), b = _mm512_maskz_loadu_ps(m1, xr + k0 + 16);
      _mm512_store_si512(out + k0, (__m512i)_mm512_cvtne2ps_pbh(b, a));  // low half from the 2nd operand
    }
  }
}

// Rows of panel pi that exist (the last panel may be partial).
inline __mmask16 panel_row_mask(const PackedWeight& p, int64_t pi) {
  return first_lanes16(p.n - pi * kPanelRows);
}

inline uint8_t* panel_align64(void* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

}  // namespace
}  // namespace fp4serve::kernels::cpu
