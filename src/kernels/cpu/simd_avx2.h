// AVX-level helpers shared by kernels_avx2.cpp and, through simd_avx512.h, the AVX-512 files: the
// last three levels of the canonical halving tree (kernels_scalar.cpp reduce32), which every fp32
// tier ends with.
//
// Internal linkage on purpose (an anonymous namespace), for the reason simd_formats.h gives: each
// including file is compiled for its own ISA, and the linker would keep one ISA's copy of an
// external-linkage inline function for all callers. Only files compiled with AVX2 flags or more
// include it.
#pragma once

#if !defined(__AVX2__)
#error "simd_avx2.h is for the ISA kernel files (*_avx2.cpp and up): it needs AVX2"
#endif

#include <immintrin.h>

#include "kernels/cpu/simd_formats.h"

namespace fp4serve::kernels::cpu {
namespace {  // NOLINT(google-build-namespaces): internal linkage per including ISA file, see above

// Lanes (i, i+4), then (i, i+2), then (0, 1) of 8 partial sums.
inline float reduce8(__m256 h8) {
  __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  __m128 h1 = _mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1));
  return _mm_cvtss_f32(h1);
}

}  // namespace
}  // namespace fp4serve::kernels::cpu
