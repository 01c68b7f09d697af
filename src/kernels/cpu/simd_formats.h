// The ISA-neutral part of the vector kernels: where each weight format keeps W(n, k) and its
// scales, which formats have a vector dequant, and the SSSE3-level part of that dequant (nibbles to
// int8 codes, block scales). Included by kernels_avx2.cpp and, through simd_avx512.h, by
// kernels_avx512.cpp, linear_avx512bf16.cpp, panel_convert.h and linear_panels_*.cpp: one
// definition for all of them instead of a copy in each ISA file.
//
// Everything here has internal linkage on purpose (an anonymous namespace, as panel_convert.h):
// each including file is compiled for its own ISA (cmake/Modules.cmake fp4serve_isa_flags), and an
// inline function with external linkage would be emitted by several of them while the linker keeps
// one copy for every caller -- an AVX-512 build of a helper called by the AVX2 tier is a SIGILL on
// a CPU without AVX-512. For the same reason this header calls no external-linkage inline function
// (float_formats.h's bf16_to_f32, say); out-of-line baseline code (e4m3_table) is fine. Never
// include it from a baseline (non-ISA) file.
#pragma once

#if !defined(__SSSE3__)
#error "simd_formats.h is for the ISA kernel files (*_avx2.cpp and up): it needs SSSE3"
#endif

#include <immintrin.h>

#include <cstdint>

#include "kernels/weights.h"
#include "tensor/float_formats.h"

// Inner helpers must inline into the K loops: a call there makes every vector register
// caller-saved and pushes the accumulators to the stack.
#define FP4SERVE_INLINE __attribute__((always_inline)) inline

namespace fp4serve::kernels::cpu {
namespace {  // NOLINT(google-build-namespaces): internal linkage per including ISA file, see above

// ---------------------------------------------------------------------------------------------
// Where the bytes are (weights.h has the layouts).

// BF16 (T = uint16_t) and FP8 (T = uint8_t): element W(n, k).
template <class T>
inline const T* natural_elems(const WeightView& w, int64_t n, int64_t k) {
  return static_cast<const T*>(w.data) + n * w.ld + k;
}

// NVFP4 and INT4 packed: the byte holding W(n, k) and W(n, k + 1), k even (low nibble first).
inline const uint8_t* nibble_bytes(const WeightView& w, int64_t n, int64_t k) {
  return static_cast<const uint8_t*>(w.data) + n * (w.ld / 2) + k / 2;
}

// NVFP4: the e4m3 scale code of the 16-k block holding W(n, k).
inline const uint8_t* nvfp4_scale_codes(const WeightView& w, int64_t n, int64_t k) {
  return static_cast<const uint8_t*>(w.scales) + n * w.scale_ld + k / 16;
}

// INT4 packed: the fp32 scale of the group holding W(n, k).
inline float int4_scale(const WeightView& w, int64_t n, int64_t k) {
  return static_cast<const float*>(w.scales)[n * w.scale_ld + k / w.group];
}

// FP8 block: the scale of the 128 x 128 block holding W(n, k), stored as fp32 or bf16.
inline float fp8_block_scale(const WeightView& w, int64_t n, int64_t k) {
  const int64_t si = (n / 128) * w.scale_ld + k / 128;
  if (!w.scales_bf16) return static_cast<const float*>(w.scales)[si];
  const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(w.scales)[si]) << 16;
  float s;
  __builtin_memcpy(&s, &bits, 4);
  return s;
}

// ---------------------------------------------------------------------------------------------
// The fp32 tiers' dequant (kernels_avx2.cpp, kernels_avx512.cpp): full 32-chunks in registers.

// Does this view have a vector dequant for full 32-chunks (the tiers' dequant32)?
inline bool vector_format(const WeightView& w) {
  switch (w.format) {
    case WeightLayout::kBf16:
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kFp8Block:
    case WeightLayout::kNvfp4:
      return true;
    case WeightLayout::kInt4Packed:
      return w.group % 32 == 0;
    case WeightLayout::kInt4Gptq:
      return false;
  }
  return false;
}

// 16 packed bytes -> 32 nibbles in K order (low nibble first) as int8 through a 16-entry LUT.
inline void nibbles32(const uint8_t* p, __m128i lut, __m128i* first16, __m128i* second16) {
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m128i mask = _mm_set1_epi8(0x0F);
  __m128i lo = _mm_and_si128(b, mask);
  __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
  *first16 = _mm_shuffle_epi8(lut, _mm_unpacklo_epi8(lo, hi));
  *second16 = _mm_shuffle_epi8(lut, _mm_unpackhi_epi8(lo, hi));
}

// NVFP4, a full 32-chunk: W(n, k0 + i) = code_i * scale[i / 16]. The codes are 2 * e2m1 as int8
// (exact small integers; first16 holds i < 16), the scales the two blocks' e4m3 scales halved.
inline void nvfp4_chunk32(const WeightView& w, int64_t n, int64_t k0, __m128i* first16, __m128i* second16,
                          float scale[2]) {
  const uint8_t* p = nibble_bytes(w, n, k0);
  const uint8_t* sc = nvfp4_scale_codes(w, n, k0);
  const float* t = e4m3_table();
  nibbles32(p, _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12), first16, second16);
  scale[0] = 0.5f * t[sc[0]];
  scale[1] = 0.5f * t[sc[1]];
}

// INT4 packed, a full 32-chunk (group % 32 == 0): W(n, k0 + i) = code_i * the returned group scale,
// the codes q - 8 as int8.
inline float int4_chunk32(const WeightView& w, int64_t n, int64_t k0, __m128i* first16, __m128i* second16) {
  const uint8_t* p = nibble_bytes(w, n, k0);
  const float s = int4_scale(w, n, k0);
  nibbles32(p, _mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7), first16, second16);
  return s;
}

// ---------------------------------------------------------------------------------------------
// The bf16 tiers' tables (linear_avx512bf16.cpp, panel_convert.h): bf16 bit patterns, 32 words for
// VPERMW (which reads 5 index bits).

// e2m1 code -> bf16: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives (code 8 is -0).
alignas(64) constexpr uint16_t kE2m1Bf16[32] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040, 0x4080, 0x40C0,
                                                0x8000, 0xBF00, 0xBF80, 0xBFC0, 0xC000, 0xC040, 0xC080, 0xC0C0};

}  // namespace
}  // namespace fp4serve::kernels::cpu
