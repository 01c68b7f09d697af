// AVX-512 (F/BW/VL/DQ) helpers shared by kernels_avx512.cpp, linear_avx512bf16.cpp and, through
// panel_convert.h, linear_panels_avx512bf16vbmi.cpp and linear_panels_amx.cpp: the 16-lane
// reduction tree, the exact e4m3 -> fp32 conversion, lane masks, and (in the BF16 files) the bf16
// vector cast. The ISA-neutral parts are simd_formats.h's.
//
// Internal linkage on purpose (an anonymous namespace), for the reason simd_formats.h gives: the
// including files are compiled for different ISAs (AVX-512, +BF16, +VBMI, +AMX), and the linker
// would keep one file's copy of an external-linkage inline function for all of them.
#pragma once

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512DQ__) || \
    !defined(__F16C__)
#error "simd_avx512.h needs AVX512 F/BW/VL/DQ and F16C (a *_avx512*.cpp or *_amx.cpp file)"
#endif

// GCC 12 reports the undefined upper lanes inside its own avx512fintrin.h helpers
// (_mm512_cvtepi8_epi32, _mm512_slli_epi32, ...) as "maybe uninitialized": a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_formats.h"

namespace fp4serve::kernels::cpu {
namespace {  // NOLINT(google-build-namespaces): internal linkage per including ISA file, see above

// The canonical tree over 16 partial sums: lanes (i, i+8), then reduce8.
inline float reduce16(__m512 a) {
  return reduce8(_mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
}

// 16 e4m3 bytes -> fp32, exact (subnormals included): the magnitude bits as an fp16 with bias 15
// instead of 7, converted by F16C, times 2^8. (Placing the bits straight into an fp32 would make
// subnormal scales fp32 denormals, and a multiply on a denormal takes a microcode assist on Intel:
// 10x slower for blocks with tiny scales.) NaN codes (0x7F / 0xFF) would read as 480: the loader
// refuses them.
FP4SERVE_INLINE __m512 e4m3x16_to_f32(__m128i bytes) {
  const __m256i b = _mm256_cvtepu8_epi16(bytes);
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7);
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
  return _mm512_mul_ps(_mm512_cvtph_ps(_mm256_or_si256(mag, sign)), _mm512_set1_ps(256.0f));
}

// The first `count` of 16 lanes (count clamped to 0 .. 16): the mask of a partial vector.
FP4SERVE_INLINE __mmask16 first_lanes16(int64_t count) {
  if (count <= 0) return 0;
  if (count >= 16) return static_cast<__mmask16>(0xFFFF);
  return static_cast<__mmask16>((1u << count) - 1);
}

#if defined(__AVX512BF16__)
// bf16 words as the VDPBF16PS operand type.
inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }
#endif

}  // namespace
}  // namespace fp4serve::kernels::cpu
