// `linear` over packed panels (kernels/packed_weight.h) for the avx512_bf16 tier: VDPBF16PS with
// the 16 rows of a panel in the 16 fp32 lanes and each x pair broadcast, for every M.
//
// Numerics (this tier's contract, kernel_table.h): x rounded to bf16 once, weights converted to bf16
// exactly, and for every output element ONE fixed sequence over K that depends only on K and the
// format, never on M, the panel range or the thread:
//   K is cut into blocks (NVFP4: 16 k; FP8 block: 128 k; BF16 / FP8 tensor: 64 k). In a block,
//   pair row r (k 2r, 2r+1) adds into chain (r mod C) from +0 with VDPBF16PS (C = 2 for NVFP4,
//   4 otherwise; chains hide the instruction's latency), then t = t0 + t1 (C = 2) or
//   (t0 + t1) + (t2 + t3), and acc = fma(t, block scale, acc) (NVFP4, FP8 block) or acc = acc + t;
//   y = acc * tensor_scale.
// M <= 4 converts the weights in registers and streams each panel once; M > 4 converts a panel
// into bf16 pair rows in scratch once and runs the same sequence from there for every x row.
// Conversions are panel_convert.h's.
//
// Needs AVX512_VBMI besides the tier's BF16: the tier attaches this kernel only when the CPU has it.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/panel_convert.h"
#include "kernels/cpu/packed_weight.h"

namespace fp4serve::kernels::cpu {
namespace {

FP4SERVE_INLINE __m512i bcast_pair(const uint16_t* xb, int64_t r) {
  uint32_t v;
  std::memcpy(&v, xb + 2 * r, 4);
  return _mm512_set1_epi32(static_cast<int>(v));
}

// Block structure, prefetch and scale application of each format (the sequence of the header).
// NVFP4 streams its panels with a software prefetch 2 KB ahead: measured from DRAM (interleaved
// A/B runs, best of 4) 14 -> 20 GB/s; for the other formats a prefetch measured slower.
FP4SERVE_INLINE void prefetch_ahead(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p + 2048), _MM_HINT_T0);
}

struct Bf16Fmt : PanelBf16 {
  static constexpr int kOctetsPerBlock = 8, kChains = 4;
  FP4SERVE_INLINE void prefetch(const uint8_t*, int64_t) const {}
  FP4SERVE_INLINE __m512 apply(__m512 acc, __m512 t, const uint8_t*, int64_t) const { return _mm512_add_ps(acc, t); }
};
struct Fp8Fmt : PanelFp8 {
  static constexpr int kOctetsPerBlock = 8, kChains = 4;
  FP4SERVE_INLINE void prefetch(const uint8_t*, int64_t) const {}
  FP4SERVE_INLINE __m512 apply(__m512 acc, __m512 t, const uint8_t*, int64_t) const { return _mm512_add_ps(acc, t); }
};
struct Fp8BlockFmt : PanelFp8 {
  static constexpr int kOctetsPerBlock = 16, kChains = 4;
  const float* scales;  // this panel's 128-k block scales
  explicit Fp8BlockFmt(const float* s) : scales(s) {}
  FP4SERVE_INLINE void prefetch(const uint8_t*, int64_t) const {}
  FP4SERVE_INLINE __m512 apply(__m512 acc, __m512 t, const uint8_t*, int64_t o0) const {
    return _mm512_fmadd_ps(t, _mm512_set1_ps(scales[o0 / kOctetsPerBlock]), acc);
  }
};
struct Nvfp4Fmt : PanelNvfp4 {
  static constexpr int kOctetsPerBlock = 2, kChains = 2;
  bool normal = false;  // this panel's scales are all positive normal codes
  FP4SERVE_INLINE void prefetch(const uint8_t* panel, int64_t o0) const {
    if (o0 % 8 == 0) {  // once per 576-byte superblock: its 9 lines
      const uint8_t* sb = panel + 576 * (o0 / 8);
      for (int l = 0; l < 9; ++l) prefetch_ahead(sb + 64 * l);
    }
  }
  FP4SERVE_INLINE __m512 apply(__m512 acc, __m512 t, const uint8_t* panel, int64_t o0) const {
    return _mm512_fmadd_ps(t, block_scale(panel, o0 / 2, normal), acc);
  }
};

// Pair rows of one panel converted into scratch (M > 4): octet o at stage + 256 o; NVFP4 block
// scale vectors at scales + 16 b (the values block_scale computes, so the sequence is unchanged).
template <class F>
struct Staged {
  static constexpr int kOctetsPerBlock = F::kOctetsPerBlock, kChains = F::kChains;
  const F& f;
  const uint8_t* stage;
  const float* scales;
  FP4SERVE_INLINE void prefetch(const uint8_t*, int64_t) const {}
  FP4SERVE_INLINE void octet(const uint8_t*, int64_t o, __m512i r[4]) const {
    for (int t = 0; t < 4; ++t) r[t] = _mm512_load_si512(stage + 256 * o + 64 * t);
  }
  FP4SERVE_INLINE __m512 apply(__m512 acc, __m512 t, const uint8_t* panel, int64_t o0) const {
    if constexpr (std::is_same_v<F, Nvfp4Fmt>) {
      return _mm512_fmadd_ps(t, _mm512_load_ps(scales + 16 * (o0 / 2)), acc);
    } else {
      return f.apply(acc, t, panel, o0);
    }
  }
};

// The block sequence of the header for MT x rows against one panel: pair row r = 4o + u adds into
// chain u mod C.
template <int MT, class Src>
FP4SERVE_INLINE void panel_rows(const Src& src, const uint8_t* panel, int64_t octets, const uint16_t* const xr[MT],
                                __m512 acc[MT]) {
  constexpr int OB = Src::kOctetsPerBlock, C = Src::kChains;
  #pragma GCC unroll 4
  for (int m = 0; m < MT; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t o0 = 0; o0 < octets; o0 += OB) {
    src.prefetch(panel, o0);
    __m512 t[MT][C];
    #pragma GCC unroll 4
    for (int m = 0; m < MT; ++m)
      #pragma GCC unroll 4
      for (int c = 0; c < C; ++c) t[m][c] = _mm512_setzero_ps();
    #pragma GCC unroll 16
    for (int oo = 0; oo < OB; ++oo) {
      const int64_t o = o0 + oo;
      __m512i r[4];
      src.octet(panel, o, r);
      #pragma GCC unroll 4
      for (int u = 0; u < 4; ++u)
        #pragma GCC unroll 4
        for (int m = 0; m < MT; ++m)
          t[m][u % C] = _mm512_dpbf16_ps(t[m][u % C], as_bh(r[u]), as_bh(bcast_pair(xr[m], 4 * o + u)));
    }
    #pragma GCC unroll 4
    for (int m = 0; m < MT; ++m) {
      __m512 s = _mm512_add_ps(t[m][0], t[m][1]);
      if constexpr (C == 4) s = _mm512_add_ps(s, _mm512_add_ps(t[m][2], t[m][3]));
      acc[m] = src.apply(acc[m], s, panel, o0);
    }
  }
}

struct Call {
  const PackedWeight& p;
  const uint16_t* xb;  // M bf16 rows of kp
  int64_t M;
  float* y;
  int64_t ldy;
};

template <int MT, class Src>
FP4SERVE_INLINE void rows_group(const Src& src, const Call& c, int64_t m0, int64_t pi) {
  const uint16_t* xr[MT];
  for (int m = 0; m < MT; ++m) xr[m] = c.xb + (m0 + m) * c.p.kp;
  __m512 acc[MT];
  panel_rows<MT>(src, c.p.panel(pi), c.p.kp / 8, xr, acc);
  const __mmask16 rows = panel_row_mask(c.p, pi);
  const __m512 ts = _mm512_set1_ps(c.p.tensor_scale);
  #pragma GCC unroll 4
  for (int m = 0; m < MT; ++m)
    _mm512_mask_storeu_ps(c.y + (m0 + m) * c.ldy + pi * kPanelRows, rows, _mm512_mul_ps(acc[m], ts));
}

// All x rows of the call against panel pi from `src`: groups of 4, then the rest.
template <class Src>
void all_rows(const Src& src, const Call& c, int64_t pi) {
  int64_t m = 0;
  for (; m + 4 <= c.M; m += 4) rows_group<4>(src, c, m, pi);
  switch (c.M - m) {
    case 3: rows_group<3>(src, c, m, pi); break;
    case 2: rows_group<2>(src, c, m, pi); break;
    case 1: rows_group<1>(src, c, m, pi); break;
    default: break;
  }
}

// Converts panel pi into scratch pair rows (and NVFP4 scale vectors) for the M > 4 path.
template <class F>
void stage_panel(const F& f, const PackedWeight& p, int64_t pi, uint8_t* stage, float* scales) {
  const uint8_t* panel = p.panel(pi);
  for (int64_t o = 0; o < p.kp / 8; ++o) {
    __m512i r[4];
    f.octet(panel, o, r);
    for (int t = 0; t < 4; ++t) _mm512_store_si512(stage + 256 * o + 64 * t, r[t]);
  }
  if constexpr (std::is_same_v<F, Nvfp4Fmt>)
    for (int64_t b = 0; b < p.kp / 16; ++b) _mm512_store_ps(scales + 16 * b, Nvfp4Fmt::block_scale(panel, b, f.normal));
}

template <class F>
void run_panel(const F& f, const Call& c, int64_t pi, uint8_t* stage, float* scales) {
  if (c.M <= 4) {
    all_rows(f, c, pi);
  } else {
    stage_panel(f, c.p, pi, stage, scales);
    all_rows(Staged<F>{f, stage, scales}, c, pi);
  }
}

}  // namespace

void linear_panels_avx512bf16(const float* x, int64_t M, int64_t ldx, const PackedWeight& p, int64_t n0, int64_t n1,
                              float* y, int64_t ldy, float* scratch) {
  if (M <= 0 || n0 >= n1) return;
  const int64_t p0 = n0 / kPanelRows, p1 = (n1 + kPanelRows - 1) / kPanelRows;
  uint8_t* base = panel_align64(scratch);
  auto* xb = reinterpret_cast<uint16_t*>(base);
  panel_prepare_x(x, M, ldx, p.k, p.kp, xb);
  uint8_t* stage = base + (M * p.kp * 2 + 63) / 64 * 64;
  auto* scales = reinterpret_cast<float*>(stage + p.kp * 32);
  const Call c{p, xb, M, y, ldy};
  switch (p.format) {
    case WeightLayout::kBf16: {
      const Bf16Fmt f;
      for (int64_t pi = p0; pi < p1; ++pi) run_panel(f, c, pi, stage, scales);
      break;
    }
    case WeightLayout::kFp8Tensor: {
      const Fp8Fmt f;
      for (int64_t pi = p0; pi < p1; ++pi) run_panel(f, c, pi, stage, scales);
      break;
    }
    case WeightLayout::kFp8Block:
      for (int64_t pi = p0; pi < p1; ++pi) {
        const Fp8BlockFmt f(p.block_scales.data() + pi * p.fp8_blocks_per_panel());
        run_panel(f, c, pi, stage, scales);
      }
      break;
    case WeightLayout::kNvfp4: {
      Nvfp4Fmt f;
      for (int64_t pi = p0; pi < p1; ++pi) {
        f.normal = p.normal_scales[static_cast<size_t>(pi)] != 0;
        run_panel(f, c, pi, stage, scales);
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace fp4serve::kernels::cpu
