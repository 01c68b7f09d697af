// AVX512-BF16 `linear` (the avx512_bf16 kernel tier): bf16 x bf16 -> fp32 dots with VDPBF16PS.
// The other primitives of the tier (dot, axpy, gdn_step) are the avx512 ones.
//
// Numerics contract (also in kernel_table.h). NOT bit-identical to the scalar reference:
//   - x is rounded to bf16 (RNE, VCVTNE2PS2BF16) once per call. Model activations are bf16 values
//     already (HF runs nn.Linear on bf16 tensors), so for them this is exact.
//   - weights become bf16 exactly: bf16 as is; e4m3 codes (subnormals included) and e2m1 / int4
//     codes all fit in bf16. Block scales are NOT folded into the weights: VDPBF16PS sums a block's
//     products, then one fp32 fma multiplies the partial sum by the block scale and adds it to the
//     row accumulator (NVFP4: per 16 k, e4m3 scale; FP8 block: per 128 k; INT4: per 64 k chunk).
//   - VDPBF16PS has its own rounding order (two products per fp32 lane per instruction) and treats
//     bf16 subnormal inputs / fp32 subnormal results as zero (DAZ/FTZ).
// So: (a) for bf16-valued x each output is within ~1e-5 * sum_k |x*w| (+ a tiny absolute term for
// flushed subnormals) of scalar; (b) each output element is ONE fixed sequence of operations over K
// that depends only on K and the weight format: one fp32 accumulator (16 lanes) per (x row, weight
// row), chunks in increasing k, then a fixed halving tree. The same sequence runs whether the
// weights are converted in registers (M <= 4) or taken from a dequantized bf16 tile in scratch
// (M > 4), and whatever the row grouping, so results do not depend on M, the tile, the N split or
// the thread count.
//
// Layouts. Natural formats (bf16, fp8): a chunk is 32 k = one zmm of bf16, lane i = k 2i, 2i+1.
// Nibble formats (nvfp4, int4 packed): a chunk is 64 k = 32 packed bytes, widened to words; the
// low nibbles (even k) and high nibbles (odd k) are looked up separately (vpermw from a 16-entry
// bf16 table), giving "even" and "odd" zmms: fp32 lane i of both covers k0 + 4i .. k0 + 4i + 3, so
// lanes 4b..4b+3 are exactly NVFP4 block b of the chunk. x is stored in the same even/odd order.
// (A byte shuffle into the high byte alone would not do: 1.0 is bf16 0x3F80, 3.0 is 0x4040.)
// INT4 in the GPTQ layout, and INT4 groups that are not a multiple of 64, take the avx512 fp32 path.
//
// Compiled with -mavx512bf16 -mavx512vnni (cmake/Modules.cmake); called only when
// cpu_features() reports avx512_bf16. The only inline helpers from shared headers called here are
// simd_formats.h's and simd_avx512.h's, which have internal linkage (an external-linkage inline
// function compiled with these flags could be picked by the linker for baseline callers).
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/simd_formats.h"

namespace fp4serve::kernels::cpu {
namespace {

constexpr int64_t kGroupK = 256;  // x rows and the nibble loop advance in groups of 4 x 64 k
constexpr int kTileRows = 8;      // weight rows dequantized into scratch at a time (M > 4)

inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

inline __m512i as_i(__m512bh v) { return (__m512i)v; }

// ---------------------------------------------------------------------------------------------
// Tables (bf16 bit patterns).

// e2m1 code -> bf16 is simd_formats.h's kE2m1Bf16.
// int4 code q -> bf16(q - 8).
alignas(64) constexpr uint16_t kInt4Bf16[32] = {0xC100, 0xC0E0, 0xC0C0, 0xC0A0, 0xC080, 0xC040, 0xC000, 0xBF80,
                                                0x0000, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0, 0x40E0};
// e4m3 subnormal magnitude m (exponent field 0) -> bf16(m * 2^-9).
alignas(64) constexpr uint16_t kE4m3SubBf16[32] = {0x0000, 0x3B00, 0x3B80, 0x3BC0, 0x3C00, 0x3C20, 0x3C40, 0x3C60};

inline __m512i load_table(const uint16_t* t) { return _mm512_load_si512(t); }

// The first `count` bits set (count clamped to 0 .. 64).
inline __mmask64 byte_mask(int64_t count) {
  if (count <= 0) return 0;
  if (count >= 64) return ~__mmask64{0};
  return (__mmask64{1} << count) - 1;
}

// ---------------------------------------------------------------------------------------------
// Conversions.

// 32 e4m3 bytes -> 32 bf16 (exact). Normal codes: shift the 7 magnitude bits under the bf16
// exponent and rebias by 120; exponent-0 codes (zero and subnormals) from a small table.
inline __m512i e4m3x32_to_bf16(__m256i bytes, __m512i sub_table) {
  const __m512i w = _mm512_cvtepu8_epi16(bytes);
  const __m512i mag = _mm512_and_si512(w, _mm512_set1_epi16(0x7F));
  __m512i v = _mm512_add_epi16(_mm512_slli_epi16(mag, 4), _mm512_set1_epi16(0x3C00));
  const __mmask32 sub = _mm512_testn_epi16_mask(w, _mm512_set1_epi16(0x78));
  v = _mm512_mask_permutexvar_epi16(v, sub, mag, sub_table);
  // v | (w << 8 & 0x8000): the sign.
  return _mm512_ternarylogic_epi32(v, _mm512_slli_epi16(w, 8), _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);
}

// 32 packed bytes (64 nibbles, k0 .. k0+63) -> even-k and odd-k bf16 words via a 16-entry table.
inline void nibbles_to_bf16(const uint8_t* p, __m512i table, __m512i* even, __m512i* odd) {
  const __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  *even = _mm512_permutexvar_epi16(_mm512_and_si512(w, _mm512_set1_epi16(0x0F)), table);
  *odd = _mm512_permutexvar_epi16(_mm512_srli_epi16(w, 4), table);
}

// ---------------------------------------------------------------------------------------------
// x rows -> bf16 scratch rows of kx (multiple of 256) elements, zero padded past K.

void prepare_x(const float* x, int64_t M, int64_t ldx, int64_t K, bool nibble_order, uint16_t* xb, int64_t kx) {
  __m512i ie = _mm512_setzero_si512(), io = _mm512_setzero_si512();
  if (nibble_order) {
    alignas(64) uint16_t e[32], o[32];
    for (int j = 0; j < 32; ++j) {
      e[j] = static_cast<uint16_t>(2 * j);
      o[j] = static_cast<uint16_t>(2 * j + 1);
    }
    ie = _mm512_load_si512(e);
    io = _mm512_load_si512(o);
  }
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    uint16_t* out = xb + m * kx;
    for (int64_t k0 = 0; k0 < kx; k0 += 64) {
      __m512 f[4];
      #pragma GCC unroll 16
      for (int q = 0; q < 4; ++q) {
        const int64_t r = K - (k0 + 16 * q);
        f[q] = _mm512_maskz_loadu_ps(first_lanes16(r), xr + k0 + 16 * q);
      }
      // cvtne2ps: low half from the second operand.
      const __m512i a = as_i(_mm512_cvtne2ps_pbh(f[1], f[0]));
      const __m512i b = as_i(_mm512_cvtne2ps_pbh(f[3], f[2]));
      if (nibble_order) {
        _mm512_storeu_si512(out + k0, _mm512_permutex2var_epi16(a, ie, b));
        _mm512_storeu_si512(out + k0 + 32, _mm512_permutex2var_epi16(a, io, b));
      } else {
        _mm512_storeu_si512(out + k0, a);
        _mm512_storeu_si512(out + k0 + 32, b);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Nibble formats (NVFP4, INT4 packed with group % 64 == 0). Per (x row m, weight row r), per
// 64-chunk c:  t = dpbf16(dpbf16(0, even_c, xe_c), odd_c, xo_c);  acc = fma(t, scale_c, acc)
// where scale_c lane i is the scale of k0 + 4i (NVFP4: block c*4 + i/4; INT4: the chunk's group).

// Weights converted in registers from the view. kNv: NVFP4 (e4m3 per-16 scales), else INT4.
template <bool kNv>
struct NibbleFused {
  const WeightView& w;
  __m512i table;
  __m512i lane_block[4];  // NVFP4 permute indices: lane i of chunk c takes block scale 4c + i/4
  const uint8_t* p[kTileRows];
  __m512 S[kTileRows];     // NVFP4: the 16 block scales of the current 256-k group
  int64_t group_of[4];     // INT4: scale column of each chunk of the current group
  alignas(64) uint8_t tail_p[kTileRows][128];
  int64_t n0 = 0;

  explicit NibbleFused(const WeightView& wv) : w(wv) {
    table = load_table(kNv ? kE2m1Bf16 : kInt4Bf16);
    for (int c = 0; c < 4; ++c) {
      alignas(64) int32_t idx[16];
      for (int i = 0; i < 16; ++i) idx[i] = 4 * c + i / 4;
      lane_block[c] = _mm512_load_si512(idx);
    }
  }
  void begin_rows(int64_t n) { n0 = n; }
  FP4SERVE_INLINE void begin_group(int r, int64_t g0) {
    const int64_t n = n0 + r;
    const uint8_t* prow = nibble_bytes(w, n, g0);
    if (!kNv && r == 0)  // callers start every group at row 0
      for (int c = 0; c < 4; ++c) group_of[c] = (g0 + 64 * c) / w.group;
    if (g0 + kGroupK <= w.k) {
      p[r] = prow;
      // The same 256 k of the row kTileRows further on (the next pass): rows are only 1 KB at
      // K = 2048, too short for the hardware stream prefetcher when 8 are read side by side.
      const uint8_t* ahead = prow + kTileRows * (w.ld / 2);
      _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 64), _MM_HINT_T0);
      if (kNv) {
        const uint8_t* srow = nvfp4_scale_codes(w, n, g0);
        _mm_prefetch(reinterpret_cast<const char*>(srow + kTileRows * w.scale_ld), _MM_HINT_T0);
        S[r] = e4m3x16_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(srow)));
      }
      return;
    }
    // Partial group: zero-padded copies (zero codes and zero scales add nothing). Masked vector
    // copies, not memcpy: a call inside the K loop would force the accumulators out of registers.
    const int64_t bytes = (w.k - g0) / 2;  // < 128
    _mm512_store_si512(tail_p[r], _mm512_maskz_loadu_epi8(byte_mask(bytes), prow));
    _mm512_store_si512(tail_p[r] + 64, _mm512_maskz_loadu_epi8(byte_mask(bytes - 64), prow + 64));
    p[r] = tail_p[r];
    if (kNv) {
      const uint8_t* srow = nvfp4_scale_codes(w, n, g0);
      const __m128i sb = _mm_maskz_loadu_epi8(static_cast<__mmask16>(byte_mask((w.k - g0) / 16)), srow);
      S[r] = e4m3x16_to_f32(sb);
    }
  }
  FP4SERVE_INLINE void chunk(int r, int64_t, int c, __m512i* even, __m512i* odd, __m512* scale) const {
    nibbles_to_bf16(p[r] + 32 * c, table, even, odd);
    if (kNv)
      *scale = _mm512_permutexvar_ps(lane_block[c], S[r]);
    else
      *scale = _mm512_set1_ps(static_cast<const float*>(w.scales)[(n0 + r) * w.scale_ld + group_of[c]]);
  }
};

// Weights from a bf16 tile in scratch: per row, per 64-chunk, [even | odd | scale] (192 bytes).
struct NibbleTile {
  const float* base;  // row r, chunk j at base + (r * chunks + j) * 48
  int64_t chunks;
  int64_t r0 = 0;
  void begin_rows(int64_t r) { r0 = r; }
  void begin_group(int, int64_t) {}
  FP4SERVE_INLINE void chunk(int r, int64_t g0, int c, __m512i* even, __m512i* odd,
                             __m512* scale) const {
    const float* q = base + ((r0 + r) * chunks + g0 / 64 + c) * 48;
    *even = _mm512_loadu_si512(q);
    *odd = _mm512_loadu_si512(q + 16);
    *scale = _mm512_loadu_ps(q + 32);
  }
};

// MT x rows against RT weight rows starting at the source's current row.
template <int MT, int RT, class Src>
FP4SERVE_INLINE void nibble_tile(Src& src, const uint16_t* xb, int64_t kx, int64_t K, float tensor_scale, float* y,
                                 int64_t ldy, int64_t n) {
  __m512 acc[MT][RT];
  #pragma GCC unroll 16
  for (int m = 0; m < MT; ++m)
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) acc[m][r] = _mm512_setzero_ps();
  for (int64_t g0 = 0; g0 < K; g0 += kGroupK) {
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) src.begin_group(r, g0);
    const int chunks = static_cast<int>(min64(4, (K - g0 + 63) / 64));
    for (int c = 0; c < chunks; ++c) {
      const int64_t k0 = g0 + 64 * c;
      __m512i xe[MT], xo[MT];
      #pragma GCC unroll 16
      for (int m = 0; m < MT; ++m) {
        xe[m] = _mm512_loadu_si512(xb + m * kx + k0);
        xo[m] = _mm512_loadu_si512(xb + m * kx + k0 + 32);
      }
      #pragma GCC unroll 16
      for (int r = 0; r < RT; ++r) {
        __m512i we, wo;
        __m512 sv;
        src.chunk(r, g0, c, &we, &wo, &sv);
        #pragma GCC unroll 16
        for (int m = 0; m < MT; ++m) {
          __m512 t = _mm512_dpbf16_ps(_mm512_setzero_ps(), as_bh(we), as_bh(xe[m]));
          t = _mm512_dpbf16_ps(t, as_bh(wo), as_bh(xo[m]));
          acc[m][r] = _mm512_fmadd_ps(t, sv, acc[m][r]);
        }
      }
    }
  }
  #pragma GCC unroll 16
  for (int m = 0; m < MT; ++m)
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) y[m * ldy + n + r] = reduce16(acc[m][r]) * tensor_scale;
}

// ---------------------------------------------------------------------------------------------
// Natural formats (bf16, fp8 tensor, fp8 block). Per (m, r), per 32-chunk c:
//   bf16 / fp8 tensor:  acc = dpbf16(acc, w_c, x_c)
//   fp8 block:          per 128-k block: t = 0; t = dpbf16(t, w_c, x_c) over its chunks;
//                       acc = fma(t, scale_block, acc)

struct NaturalFused {
  const WeightView& w;
  __m512i sub_table;
  int64_t n0 = 0;
  explicit NaturalFused(const WeightView& wv) : w(wv), sub_table(load_table(kE4m3SubBf16)) {}
  void begin_rows(int64_t n) { n0 = n; }
  FP4SERVE_INLINE __m512i chunk(int r, int64_t k0) const {
    const int64_t n = n0 + r;
    const int64_t left = w.k - k0;
    if (w.format == WeightLayout::kBf16) {
      const uint16_t* p = natural_elems<uint16_t>(w, n, k0);
      if (left >= 32) return _mm512_loadu_si512(p);
      return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1u << left) - 1), p);
    }
    const uint8_t* p = natural_elems<uint8_t>(w, n, k0);
    const __m256i b = left >= 32 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                                 : _mm256_maskz_loadu_epi8(static_cast<__mmask32>((1u << left) - 1), p);
    return e4m3x32_to_bf16(b, sub_table);
  }
  float block_scale(int r, int64_t k0) const { return fp8_block_scale(w, n0 + r, k0); }
};

// Per row: `chunks` chunks of 32 bf16 (64 bytes = 16 floats each), then (fp8 block) one float per
// 128-k block, all in scratch.
struct NaturalTile {
  const float* base;
  int64_t row_floats;  // 16 * chunks + blocks, rounded to 16
  int64_t chunks;
  int64_t r0 = 0;
  void begin_rows(int64_t r) { r0 = r; }
  FP4SERVE_INLINE __m512i chunk(int r, int64_t k0) const {
    return _mm512_loadu_si512(base + (r0 + r) * row_floats + k0 / 2);
  }
  float block_scale(int r, int64_t k0) const { return base[(r0 + r) * row_floats + 16 * chunks + k0 / 128]; }
};

template <int MT, int RT, bool kBlock, class Src>
FP4SERVE_INLINE void natural_tile(const Src& src, const uint16_t* xb, int64_t kx, int64_t K, float tensor_scale,
                                  float* y, int64_t ldy, int64_t n) {
  __m512 acc[MT][RT];
  #pragma GCC unroll 16
  for (int m = 0; m < MT; ++m)
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) acc[m][r] = _mm512_setzero_ps();
  const int64_t span = kBlock ? 128 : kGroupK;  // chunks between scale applications
  for (int64_t b0 = 0; b0 < K; b0 += span) {
    __m512 t[MT][RT];
    if (kBlock)
      #pragma GCC unroll 16
      for (int m = 0; m < MT; ++m)
        #pragma GCC unroll 16
        for (int r = 0; r < RT; ++r) t[m][r] = _mm512_setzero_ps();
    const int64_t bend = min64(K, b0 + span);
    for (int64_t k0 = b0; k0 < bend; k0 += 32) {
      __m512i xv[MT];
      #pragma GCC unroll 16
      for (int m = 0; m < MT; ++m) xv[m] = _mm512_loadu_si512(xb + m * kx + k0);
      #pragma GCC unroll 16
      for (int r = 0; r < RT; ++r) {
        const __m512i wv = src.chunk(r, k0);
        #pragma GCC unroll 16
        for (int m = 0; m < MT; ++m) {
          if (kBlock)
            t[m][r] = _mm512_dpbf16_ps(t[m][r], as_bh(wv), as_bh(xv[m]));
          else
            acc[m][r] = _mm512_dpbf16_ps(acc[m][r], as_bh(wv), as_bh(xv[m]));
        }
      }
    }
    if (kBlock)
      #pragma GCC unroll 16
      for (int r = 0; r < RT; ++r) {
        const __m512 s = _mm512_set1_ps(src.block_scale(r, b0));
        #pragma GCC unroll 16
        for (int m = 0; m < MT; ++m) acc[m][r] = _mm512_fmadd_ps(t[m][r], s, acc[m][r]);
      }
  }
  #pragma GCC unroll 16
  for (int m = 0; m < MT; ++m)
    #pragma GCC unroll 16
    for (int r = 0; r < RT; ++r) y[m * ldy + n + r] = reduce16(acc[m][r]) * tensor_scale;
}

// ---------------------------------------------------------------------------------------------
// Driving the tiles: rows [n0, n1) in groups of RT (then single rows), x rows in groups of MT.

template <int MT, int RT, class Src, class Tile>
inline void rows_loop(Src& src, int64_t n0, int64_t n1, int64_t src_row0, Tile tile) {
  int64_t n = n0;
  for (; n + RT <= n1; n += RT) {
    src.begin_rows(src_row0 + (n - n0));
    tile.template operator()<MT, RT>(src, n);
  }
  for (; n < n1; ++n) {
    src.begin_rows(src_row0 + (n - n0));
    tile.template operator()<MT, 1>(src, n);
  }
}

struct Call {
  const uint16_t* xb;
  int64_t kx, K;
  float ts;
  float* y;
  int64_t ldy;
  WeightLayout f;
};

// One group of MT x rows (starting at xb/y of `c`) against rows [n0, n1) of `src`.
template <int MT, int RT, class Src>
void run_group(Src& src, const Call& c, int64_t n0, int64_t n1, int64_t src_row0) {
  if constexpr (std::is_same_v<Src, NibbleFused<true>> || std::is_same_v<Src, NibbleFused<false>> ||
                std::is_same_v<Src, NibbleTile>) {
    rows_loop<MT, RT>(src, n0, n1, src_row0, [&]<int A, int B>(Src& s, int64_t n) {
      nibble_tile<A, B>(s, c.xb, c.kx, c.K, c.ts, c.y, c.ldy, n);
    });
  } else if (c.f == WeightLayout::kFp8Block) {
    rows_loop<MT, RT>(src, n0, n1, src_row0, [&]<int A, int B>(Src& s, int64_t n) {
      natural_tile<A, B, true>(s, c.xb, c.kx, c.K, c.ts, c.y, c.ldy, n);
    });
  } else {
    rows_loop<MT, RT>(src, n0, n1, src_row0, [&]<int A, int B>(Src& s, int64_t n) {
      natural_tile<A, B, false>(s, c.xb, c.kx, c.K, c.ts, c.y, c.ldy, n);
    });
  }
}

// All M rows against [n0, n1): groups of 4 x rows, then the remainder.
template <int RT4, class Src>
void run_all_m(Src& src, Call c, int64_t M, int64_t n0, int64_t n1, int64_t src_row0) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) {
    Call g = c;
    g.xb = c.xb + m * c.kx;
    g.y = c.y + m * c.ldy;
    run_group<4, RT4>(src, g, n0, n1, src_row0);
  }
  Call g = c;
  g.xb = c.xb + m * c.kx;
  g.y = c.y + m * c.ldy;
  switch (M - m) {
    case 3: run_group<3, 2>(src, g, n0, n1, src_row0); break;
    case 2: run_group<2, 4>(src, g, n0, n1, src_row0); break;
    case 1: run_group<1, 8>(src, g, n0, n1, src_row0); break;
    default: break;
  }
}

// Dequantizes rows [n, n + rows) into the scratch tile layouts above.
template <bool kNv>
void fill_nibble_tile(const WeightView& w, int64_t n, int rows, float* tile, int64_t chunks) {
  NibbleFused<kNv> src(w);
  src.begin_rows(n);
  for (int64_t g0 = 0; g0 < w.k; g0 += kGroupK)
    for (int r = 0; r < rows; ++r) {
      src.begin_group(r, g0);
      for (int c = 0; c < 4 && g0 + 64 * c < w.k; ++c) {
        __m512i e, o;
        __m512 s;
        src.chunk(r, g0, c, &e, &o, &s);
        float* q = tile + (r * chunks + g0 / 64 + c) * 48;
        _mm512_storeu_si512(q, e);
        _mm512_storeu_si512(q + 16, o);
        _mm512_storeu_ps(q + 32, s);
      }
    }
}

void fill_natural_tile(const WeightView& w, int64_t n, int rows, float* tile, int64_t chunks, int64_t row_floats) {
  NaturalFused src(w);
  src.begin_rows(n);
  for (int r = 0; r < rows; ++r) {
    float* row = tile + r * row_floats;
    for (int64_t j = 0; j < chunks; ++j) _mm512_storeu_si512(row + 16 * j, src.chunk(r, 32 * j));
    if (w.format == WeightLayout::kFp8Block)
      for (int64_t b = 0; b * 128 < w.k; ++b) row[16 * chunks + b] = src.block_scale(r, 128 * b);
  }
}

void linear_avx512bf16(const float* x, int64_t M, int64_t ldx, const WeightView& w, int64_t n0, int64_t n1, float* y,
                       int64_t ldy, float* scratch) {
  if (M <= 0 || n0 >= n1) return;
  const bool nibble = w.format == WeightLayout::kNvfp4 ||
                      (w.format == WeightLayout::kInt4Packed && w.group > 0 && w.group % 64 == 0);
  const bool natural = w.format == WeightLayout::kBf16 || w.format == WeightLayout::kFp8Tensor ||
                       w.format == WeightLayout::kFp8Block;
  if (!nibble && !natural) {  // GPTQ layout, odd int4 groups: the fp32 avx512 path (exact order)
    avx512_kernels().linear(x, M, ldx, w, n0, n1, y, ldy, scratch);
    return;
  }
  const int64_t K = w.k;
  const int64_t kx = round_up(K, kGroupK);
  uint16_t* xb = reinterpret_cast<uint16_t*>(scratch);
  prepare_x(x, M, ldx, K, nibble, xb, kx);
  float* tile = scratch + round_up(M * kx / 2, 16);
  const Call call{xb, kx, K, w.tensor_scale, y, ldy, w.format};

  if (M <= 4) {  // decode: weights converted in registers, streamed once
    if (w.format == WeightLayout::kNvfp4) {
      NibbleFused<true> src(w);
      run_all_m<2>(src, call, M, n0, n1, n0);
    } else if (nibble) {
      NibbleFused<false> src(w);
      run_all_m<2>(src, call, M, n0, n1, n0);
    } else {
      NaturalFused src(w);
      run_all_m<2>(src, call, M, n0, n1, n0);
    }
    return;
  }
  // GEMM: a tile of weight rows dequantized to bf16 once, then used by every x row.
  for (int64_t t0 = n0; t0 < n1; t0 += kTileRows) {
    const int rows = static_cast<int>(min64(kTileRows, n1 - t0));
    if (nibble) {
      const int64_t chunks = (K + 63) / 64;
      if (w.format == WeightLayout::kNvfp4)
        fill_nibble_tile<true>(w, t0, rows, tile, chunks);
      else
        fill_nibble_tile<false>(w, t0, rows, tile, chunks);
      NibbleTile src{tile, chunks};
      run_all_m<4>(src, call, M, t0, t0 + rows, 0);
    } else {
      const int64_t chunks = (K + 31) / 32;
      const int64_t row_floats = round_up(16 * chunks + (K + 127) / 128, 16);
      fill_natural_tile(w, t0, rows, tile, chunks, row_floats);
      NaturalTile src{tile, row_floats, chunks};
      run_all_m<4>(src, call, M, t0, t0 + rows, 0);
    }
  }
}

}  // namespace

const KernelTable& avx512bf16_kernels() {
  static const KernelTable t = [] {
    KernelTable k = avx512_kernels();
    k.linear = linear_avx512bf16;
    // The panel kernel's FP8 conversion needs VPERMI2B (AVX512_VBMI); without it weights stay
    // unpacked and this file's kernel runs (Cooper Lake has BF16 but no VBMI).
    if (cpu_features().avx512vbmi) k.linear_packed = linear_panels_avx512bf16;
    return k;
  }();
  return t;
}

}  // namespace fp4serve::kernels::cpu
