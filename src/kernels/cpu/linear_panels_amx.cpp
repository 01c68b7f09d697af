// `linear` over packed panels (kernels/packed_weight.h) for the amx tier: TDPBF16PS on bf16 tiles,
// for every M (decode included), so a row's result never depends on the batch it ran in.
//
// Why AMX for M = 1 too: TDPBF16PS rounds differently from VDPBF16PS (one pair: rne(c + rne(a0*b0 +
// a1*b1)); several pairs: its own internal order), so a kernel that switched instruction families
// by M would make a request's tokens depend on its batch. Measured on the development machine: an
// element's result does not depend on the other rows or columns of its tiles or on how many rows
// are configured, and adding a tile of exact zero products leaves a (non -0) accumulator unchanged
// -- the properties the sequences below rely on (tested in linear_panels_test).
//
// Numerics (the amx tier's contract, kernel_table.h): x rounded to bf16 once, weights converted to
// bf16 exactly; per output element one fixed sequence over K, for any M, panel range or thread:
//   BF16, FP8 tensor:  C = +0; for each 32-k chunk in order: C = TDPBF16PS(C, x chunk, W chunk);
//                      y = C * tensor_scale
//   FP8 block (128):   acc = +0; per 128-k block: C = +0, four 32-k TDPBF16PS; acc = fma(C, scale, acc)
//   NVFP4 (16):        acc = +0; per 16-k block b, in order: C = TDPBF16PS(+0, x chunk with the other
//                      16 k of the block's 32-k chunk zeroed, W chunk); acc = fma(C, block scale, acc);
//                      y = acc * tensor_scale
// NVFP4's block scales need one accumulator per block, and a tile store per block would cost more
// than the multiply; for M = 1 the 16 blocks of a 256-k group therefore share one C tile, one row
// per block (row i of the x tile holds block i's values and zeros elsewhere), and one tile store
// flushes all 16. Each element sees the same inputs as in the per-block form, plus multiplies by
// exact zeros, so the bits are the same (tested).
//
// Tiles: tmm0-3 accumulators (16 fp32 columns), tmm4-5 x (A), tmm6-7 and in the small-M paths
// tmm2-3 weights (B: pair rows of 16 x 2 bf16, i.e. converted panel bytes). B comes from the panel
// itself for BF16, else from pair rows converted into scratch (panel_convert.h). Small M (<= 16;
// NVFP4: M = 1) converts a chunk at a time, two chunks ahead of its tile loads, with even and odd
// chunks on different tile sets so that a load need not wait for the previous multiply to finish
// reading its tile; larger M (NVFP4: M >= 2) converts four panel pairs once and sweeps every
// 16-row tile of x over them while the tile's rows are in L2.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/panel_convert.h"
#include "kernels/cpu/packed_weight.h"

namespace fp4serve::kernels::cpu {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Accumulator and x tiles `mrows` high, 32 k per TDPBF16PS; tmm2/3 are weight tiles when
// `b_tiles_23` (the M <= 16 paths alternate two weight tile sets), accumulators otherwise.
// Not inlined, and a memory barrier before LDTILECFG: GCC 12's _tile_loadconfig tells the compiler it
// reads only the first 8 bytes of the 64-byte configuration, so once inlined the stores to the rest
// of it could be dropped as dead (seen here: SIGILL on the next tile instruction).
__attribute__((noinline)) void configure_tiles(int mrows, bool b_tiles_23) {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    const bool b_tile = t >= 6 || (b_tiles_23 && (t == 2 || t == 3));
    c.rows[t] = static_cast<uint8_t>(b_tile ? 16 : mrows);
    c.colsb[t] = 64;
  }
  __asm__ volatile("" : : "r"(&c) : "memory");
  _tile_loadconfig(&c);
}

constexpr int64_t kAhead = 2;  // chunks converted ahead of their tile loads

// Pair rows of octets [o0, o0 + n) of a panel -> dst (B tile rows, 64 bytes each).
template <class F>
FP4SERVE_INLINE void convert_octets(const F& f, const uint8_t* panel, int64_t o0, int64_t n, uint8_t* dst) {
  #pragma GCC unroll 4
  for (int64_t i = 0; i < n; ++i) {
    __m512i r[4];
    f.octet(panel, o0 + i, r);
    #pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) _mm512_store_si512(dst + 256 * i + 64 * t, r[t]);
  }
}

struct Call {
  const PackedWeight& p;
  int64_t M;
  float* y;
  int64_t ldy;
  const uint16_t* xb;  // M bf16 rows of kp (unscaled and FP8 block formats)
  const uint16_t* xm;  // NVFP4: per row, per 32-k chunk, [block 2c | 0] and [0 | block 2c+1] (2 x 32 bf16)
  uint8_t* stage;      // 8 panels x kp x 32 bytes of pair rows (M > 16) or the M <= 16 ring
  float* cbuf;         // 2 x 4 tile images (256 floats each)
  float* acc;          // 2 panels x 16 rows x 16 floats
  int64_t x_stride() const { return p.kp * 2; }   // bytes between xb rows
  int64_t xm_stride() const { return p.kp * 4; }  // bytes between xm rows
  const uint16_t* xm_chunk(int64_t m, int64_t chunk, int half) const { return xm + m * p.kp * 2 + chunk * 64 + half * 32; }
};

// y rows m0.. of panel pi = rows [0, mrows) of a 16 x 16 fp32 image times ts.
FP4SERVE_INLINE void store_rows(const Call& c, const float* img, int mrows, int64_t m0, int64_t pi, float ts) {
  const __mmask16 rows = panel_row_mask(c.p, pi);
  const __m512 s = _mm512_set1_ps(ts);
  for (int m = 0; m < mrows; ++m)
    _mm512_mask_storeu_ps(c.y + (m0 + m) * c.ldy + pi * kPanelRows, rows, _mm512_mul_ps(_mm512_load_ps(img + 16 * m), s));
}

// acc[m] = fma(C[m], scale, acc[m]) for the first mrows rows of a stored tile image.
FP4SERVE_INLINE void flush_rows(const float* img, float* acc, int mrows, __m512 scale) {
  for (int m = 0; m < mrows; ++m)
    _mm512_store_ps(acc + 16 * m, _mm512_fmadd_ps(_mm512_load_ps(img + 16 * m), scale, _mm512_load_ps(acc + 16 * m)));
}

FP4SERVE_INLINE void zero_floats(float* p, int n) {
  for (int i = 0; i < n; i += 16) _mm512_store_ps(p + i, _mm512_setzero_ps());
}

// The 16 rows' scales of NVFP4 block b (16 k) of panel pi.
FP4SERVE_INLINE __m512 nvfp4_scale(const PackedWeight& p, int64_t pi, int64_t b) {
  return PanelNvfp4::block_scale(p.panel(pi), b, p.normal_scales[static_cast<size_t>(pi)] != 0);
}

// ---------------------------------------------------------------------------------------------
// M <= 16, unscaled (BF16, FP8 tensor) and FP8 block: chunks converted into a ring of 4 slots
// (2 KB: panel a, panel b), 32-k chunks accumulated in tmm0 (panel a) / tmm1 (panel b).

// NVFP4 panels are streamed with a software prefetch 2 KB ahead (from DRAM, interleaved A/B runs:
// 17.5 -> 21.9 GB/s on a 8192 x 2048 GEMV, 2 threads); BF16 and FP8 reach the bandwidth without one.
template <class F>
FP4SERVE_INLINE void prefetch_chunk(const uint8_t* panel, int64_t kc) {
  if constexpr (std::is_same_v<F, PanelNvfp4>) {
    constexpr int64_t kAheadBytes = 2048;
    const uint8_t* o = PanelNvfp4::octet_bytes(panel, 4 * kc);
    for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(o + kAheadBytes + 64 * l), _MM_HINT_T0);
    if (kc % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(panel + 576 * (kc / 2) + kAheadBytes), _MM_HINT_T0);
  }
}

// Chunk kc of panels A, B into ring slot (step & 3) (step: the chunk's place in the pipeline;
// kc itself where one pair runs alone).
template <class F>
FP4SERVE_INLINE void ring_convert(const F& f, const Call& c, const uint8_t* A, const uint8_t* B, int64_t kc,
                                  int64_t step) {
  prefetch_chunk<F>(A, kc);
  prefetch_chunk<F>(B, kc);
  if constexpr (!std::is_same_v<F, PanelBf16>) {
    uint8_t* slot = c.stage + (step & 3) * 2048;
    convert_octets(f, A, 4 * kc, 4, slot);
    convert_octets(f, B, 4 * kc, 4, slot + 1024);
  }
}

// C (tmm0, tmm1) += chunk kc of panels A, B; even and odd chunks use different A/B tiles.
template <class F>
FP4SERVE_INLINE void ring_chunk(const Call& c, const uint8_t* A, const uint8_t* B, int64_t kc) {
  const uint8_t* slot = c.stage + (kc & 3) * 2048;
  const bool direct = std::is_same_v<F, PanelBf16>;  // B tiles straight from the panels
  const uint8_t* ba = direct ? A + 1024 * kc : slot;
  const uint8_t* bb = direct ? B + 1024 * kc : slot + 1024;
  if ((kc & 1) == 0) {
    _tile_loadd(6, ba, 64);
    _tile_loadd(7, bb, 64);
    _tile_loadd(4, c.xb + 32 * kc, c.x_stride());
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
  } else {
    _tile_loadd(2, ba, 64);
    _tile_loadd(3, bb, 64);
    _tile_loadd(5, c.xb + 32 * kc, c.x_stride());
    _tile_dpbf16ps(0, 5, 2);
    _tile_dpbf16ps(1, 5, 3);
  }
}

template <class F>
void small_m_chunks(const F& f, const Call& c, int64_t pa, int64_t pb) {
  const int mrows = static_cast<int>(c.M);
  const uint8_t* A = c.p.panel(pa);
  const uint8_t* B = c.p.panel(pb);
  const int64_t chunks = c.p.kp / 32;
  const bool block = c.p.format == WeightLayout::kFp8Block;
  const int64_t nb = c.p.fp8_blocks_per_panel();
  const float* sa = block ? c.p.block_scales.data() + pa * nb : nullptr;
  const float* sb = block ? c.p.block_scales.data() + pb * nb : nullptr;
  if (block) zero_floats(c.acc, 512);
  for (int64_t kc = 0; kc < kAhead && kc < chunks; ++kc) ring_convert(f, c, A, B, kc, kc);
  _tile_zero(0);
  _tile_zero(1);
  for (int64_t kc = 0; kc < chunks; ++kc) {
    if (kc + kAhead < chunks) ring_convert(f, c, A, B, kc + kAhead, kc + kAhead);
    ring_chunk<F>(c, A, B, kc);
    if (block && (kc % 4 == 3 || kc + 1 == chunks)) {  // end of a 128-k block: acc = fma(C, scale, acc)
      _tile_stored(0, c.cbuf, 64);
      _tile_stored(1, c.cbuf + 256, 64);
      flush_rows(c.cbuf, c.acc, mrows, _mm512_set1_ps(sa[kc / 4]));
      flush_rows(c.cbuf + 256, c.acc + 256, mrows, _mm512_set1_ps(sb[kc / 4]));
      _tile_zero(0);
      _tile_zero(1);
    }
  }
  if (!block) {
    _tile_stored(0, c.acc, 64);
    _tile_stored(1, c.acc + 256, 64);
  }
  const float ts = block ? 1.0f : c.p.tensor_scale;
  store_rows(c, c.acc, mrows, 0, pa, ts);
  if (pb != pa) store_rows(c, c.acc + 256, mrows, 0, pb, ts);
}

// ---------------------------------------------------------------------------------------------
// NVFP4, M = 1: the blocks of a 256-k group in the rows of one C tile.

// x tiles of the M = 1 path: chunk kc is rows [16 kc, 16 kc + 16) of 64 bytes, of which only rows
// 16 kc + 2 (kc % 8) (+1) -- the chunk's two blocks' rows in its group -- are ever written. The
// buffer stays zero elsewhere from its allocation on, so a call writes 2 rows per chunk.
uint8_t* block_row_tiles(int64_t kp) {
  thread_local std::vector<uint8_t> buf;
  const size_t need = static_cast<size_t>(kp / 32 * 16 * 64 + 64);
  if (buf.size() < need) buf.assign(need, 0);
  return panel_align64(buf.data());
}

// Panels p0 .. p1 two at a time as ONE pipeline of (pair, 32-k chunk) steps, so that the conversion
// ring and the deferred group flush run on across pairs (restarting them per pair cost a third of
// the time at K = 512). Group images alternate between the two halves of c.cbuf; a group is
// flushed into its pair's accumulators while the next group multiplies.
void nvfp4_m1(const PanelNvfp4& f, const Call& c, const uint8_t* tiles, int64_t p0, int64_t p1) {
  const int64_t chunks = c.p.kp / 32, blocks = c.p.kp / 16;
  const int64_t pairs = (p1 - p0 + 1) / 2, steps = pairs * chunks;
  auto panel_a = [&](int64_t pair) { return p0 + 2 * pair; };
  auto panel_b = [&](int64_t pair) { return std::min(p0 + 2 * pair + 1, p1 - 1); };
  auto convert_step = [&](int64_t step) {
    const int64_t pair = step / chunks;
    ring_convert(f, c, c.p.panel(panel_a(pair)), c.p.panel(panel_b(pair)), step % chunks, step);
  };
  __m512 acc_a = _mm512_setzero_ps(), acc_b = _mm512_setzero_ps();
  int64_t acc_pair = 0;  // the pair acc_a / acc_b belong to
  auto finish_pair = [&]() {
    const int64_t pa = panel_a(acc_pair), pb = panel_b(acc_pair);
    const __m512 ts = _mm512_set1_ps(c.p.tensor_scale);
    _mm512_mask_storeu_ps(c.y + pa * kPanelRows, panel_row_mask(c.p, pa), _mm512_mul_ps(acc_a, ts));
    if (pb != pa) _mm512_mask_storeu_ps(c.y + pb * kPanelRows, panel_row_mask(c.p, pb), _mm512_mul_ps(acc_b, ts));
    acc_a = acc_b = _mm512_setzero_ps();
  };
  auto flush_group = [&](int64_t pair, int64_t g, int64_t half) {
    if (pair != acc_pair) {
      finish_pair();
      acc_pair = pair;
    }
    const int64_t pa = panel_a(pair), pb = panel_b(pair);
    const float* img = c.cbuf + half * 1024;
    for (int64_t b = 16 * g; b < 16 * g + 16 && b < blocks; ++b) {
      acc_a = _mm512_fmadd_ps(_mm512_load_ps(img + 16 * (b - 16 * g)), nvfp4_scale(c.p, pa, b), acc_a);
      acc_b = _mm512_fmadd_ps(_mm512_load_ps(img + 512 + 16 * (b - 16 * g)), nvfp4_scale(c.p, pb, b), acc_b);
    }
  };
  int64_t pending_pair = -1, pending_group = 0, groups_done = 0;
  for (int64_t step = 0; step < kAhead && step < steps; ++step) convert_step(step);
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t pair = step / chunks, kc = step % chunks;
    if (kc % 8 == 0) {
      _tile_zero(0);
      _tile_zero(1);
    }
    if (step + kAhead < steps) convert_step(step + kAhead);
    const uint8_t* slot = c.stage + (step & 3) * 2048;
    const uint8_t* xt = tiles + kc * 1024;
    if ((step & 1) == 0) {
      _tile_loadd(6, slot, 64);
      _tile_loadd(7, slot + 1024, 64);
      _tile_loadd(4, xt, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
    } else {
      _tile_loadd(2, slot, 64);
      _tile_loadd(3, slot + 1024, 64);
      _tile_loadd(5, xt, 64);
      _tile_dpbf16ps(0, 5, 2);
      _tile_dpbf16ps(1, 5, 3);
    }
    if (kc % 8 == 7 || kc + 1 == chunks) {
      const int64_t half = groups_done & 1;
      _tile_stored(0, c.cbuf + half * 1024, 64);
      _tile_stored(1, c.cbuf + half * 1024 + 512, 64);
      if (pending_pair >= 0) flush_group(pending_pair, pending_group, half ^ 1);
      pending_pair = pair;
      pending_group = kc / 8;
      ++groups_done;
    }
  }
  if (pending_pair >= 0) flush_group(pending_pair, pending_group, (groups_done - 1) & 1);
  finish_pair();
}

// ---------------------------------------------------------------------------------------------
// M > 16 (and NVFP4 with 2 <= M <= 16): two panels converted once into c.stage, then tiles of x.

// Pair rows of panel pi: the panel itself for BF16, else converted into `dst`.
template <class F>
const uint8_t* stage_panel(const F& f, const Call& c, int64_t pi, uint8_t* dst) {
  if constexpr (std::is_same_v<F, PanelBf16>) {
    return c.p.panel(pi);
  } else {
    convert_octets(f, c.p.panel(pi), 0, c.p.kp / 8, dst);
    return dst;
  }
}

// Unscaled / FP8 block: x tiles m0 and m0 + 16 (`two`) against panels pa, pb; C0..C3.
void big_chunks(const Call& c, const uint8_t* ba, const uint8_t* bb, int64_t m0, int mrows, bool two, int64_t pa,
                int64_t pb) {
  const uint16_t* x0 = c.xb + m0 * c.p.kp;
  const uint16_t* x1 = x0 + 16 * c.p.kp;
  const bool block = c.p.format == WeightLayout::kFp8Block;
  const int64_t nb = c.p.fp8_blocks_per_panel(), chunks = c.p.kp / 32;
  const float* sa = block ? c.p.block_scales.data() + pa * nb : nullptr;
  const float* sb = block ? c.p.block_scales.data() + pb * nb : nullptr;
  float* img = c.cbuf;
  if (block) zero_floats(c.acc, 1024);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t kc = 0; kc < chunks; ++kc) {
    _tile_loadd(6, ba + 1024 * kc, 64);
    _tile_loadd(7, bb + 1024 * kc, 64);
    _tile_loadd(4, x0 + 32 * kc, c.x_stride());
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (two) {
      _tile_loadd(5, x1 + 32 * kc, c.x_stride());
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    if (block && (kc % 4 == 3 || kc + 1 == chunks)) {
      _tile_stored(0, img, 64);
      _tile_stored(1, img + 256, 64);
      flush_rows(img, c.acc, mrows, _mm512_set1_ps(sa[kc / 4]));
      flush_rows(img + 256, c.acc + 256, mrows, _mm512_set1_ps(sb[kc / 4]));
      _tile_zero(0);
      _tile_zero(1);
      if (two) {
        _tile_stored(2, img + 512, 64);
        _tile_stored(3, img + 768, 64);
        flush_rows(img + 512, c.acc + 512, 16, _mm512_set1_ps(sa[kc / 4]));
        flush_rows(img + 768, c.acc + 768, 16, _mm512_set1_ps(sb[kc / 4]));
        _tile_zero(2);
        _tile_zero(3);
      }
    }
  }
  if (!block) {
    _tile_stored(0, c.acc, 64);
    _tile_stored(1, c.acc + 256, 64);
    if (two) {
      _tile_stored(2, c.acc + 512, 64);
      _tile_stored(3, c.acc + 768, 64);
    }
  }
  const float ts = block ? 1.0f : c.p.tensor_scale;
  store_rows(c, c.acc, mrows, m0, pa, ts);
  if (pb != pa) store_rows(c, c.acc + 256, mrows, m0, pb, ts);
  if (two) {
    store_rows(c, c.acc + 512, 16, m0 + 16, pa, ts);
    if (pb != pa) store_rows(c, c.acc + 768, 16, m0 + 16, pb, ts);
  }
}

// NVFP4, one x tile (rows m0 .. m0 + mrows) against staged panels: per 32-k chunk, tmm0/1 = the
// chunk's two blocks of panel a, tmm2/3 of panel b, each from +0 with the other block masked out
// of x (c.xm); the four images are flushed into c.acc one chunk later.
void nvfp4_tiles(const Call& c, const uint8_t* ba, const uint8_t* bb, int64_t m0, int mrows, int64_t pa, int64_t pb) {
  const int64_t chunks = c.p.kp / 32;
  zero_floats(c.acc, 512);
  auto flush_chunk = [&](int64_t kc) {
    const float* img = c.cbuf + (kc & 1) * 1024;
    flush_rows(img, c.acc, mrows, nvfp4_scale(c.p, pa, 2 * kc));
    flush_rows(img + 256, c.acc, mrows, nvfp4_scale(c.p, pa, 2 * kc + 1));
    flush_rows(img + 512, c.acc + 256, mrows, nvfp4_scale(c.p, pb, 2 * kc));
    flush_rows(img + 768, c.acc + 256, mrows, nvfp4_scale(c.p, pb, 2 * kc + 1));
  };
  for (int64_t kc = 0; kc < chunks; ++kc) {
    _tile_loadd(6, ba + 1024 * kc, 64);
    _tile_loadd(7, bb + 1024 * kc, 64);
    _tile_loadd(4, c.xm_chunk(m0, kc, 0), c.xm_stride());
    _tile_loadd(5, c.xm_chunk(m0, kc, 1), c.xm_stride());
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 5, 6);
    _tile_dpbf16ps(2, 4, 7);
    _tile_dpbf16ps(3, 5, 7);
    float* img = c.cbuf + (kc & 1) * 1024;
    _tile_stored(0, img, 64);
    _tile_stored(1, img + 256, 64);
    _tile_stored(2, img + 512, 64);
    _tile_stored(3, img + 768, 64);
    if (kc > 0) flush_chunk(kc - 1);
  }
  flush_chunk(chunks - 1);
  store_rows(c, c.acc, mrows, m0, pa, c.p.tensor_scale);
  if (pb != pa) store_rows(c, c.acc + 256, mrows, m0, pb, c.p.tensor_scale);
}

// Panel pairs staged per group for the M > 16 sweep: every tile of x meets all the group's pairs
// while its rows are in L2 (one pair at a time streamed all of x from L3 again for every pair).
constexpr int64_t kPairsPerGroup = 4;

// Every 16-row tile of x against the panel pairs starting at pa (up to kPairsPerGroup; the pairs'
// panels converted once): full tiles first, the partial one under its own tile configuration.
template <class F>
void tiles_of_x(const F& f, const Call& c, int64_t pa, int64_t p1) {
  const uint8_t* b[2 * kPairsPerGroup];
  int64_t pan[2 * kPairsPerGroup];
  int pairs = 0;
  for (int64_t p = pa; p < p1 && pairs < kPairsPerGroup; p += 2, ++pairs) {
    pan[2 * pairs] = p;
    pan[2 * pairs + 1] = p + 1 < p1 ? p + 1 : p;  // an odd last panel runs as its own pair
    for (int h = 0; h < 2; ++h)
      b[2 * pairs + h] = stage_panel(f, c, pan[2 * pairs + h], c.stage + (2 * pairs + h) * c.p.kp * 32);
  }
  const int64_t full = c.M / 16, tail = c.M % 16;
  for (int pass = 0; pass < 2; ++pass) {
    const int mrows = pass == 0 ? 16 : static_cast<int>(tail);
    const int64_t mt0 = pass == 0 ? 0 : full, mt1 = pass == 0 ? full : full + 1;
    if (mrows == 0 || mt0 == mt1) continue;
    configure_tiles(mrows, /*b_tiles_23=*/false);
    if constexpr (std::is_same_v<F, PanelNvfp4>) {
      for (int64_t mt = mt0; mt < mt1; ++mt)
        for (int q = 0; q < pairs; ++q) nvfp4_tiles(c, b[2 * q], b[2 * q + 1], 16 * mt, mrows, pan[2 * q], pan[2 * q + 1]);
    } else {
      for (int64_t mt = mt0; mt < mt1; mt += 2) {
        const bool two = pass == 0 && mt + 1 < mt1;
        for (int q = 0; q < pairs; ++q) big_chunks(c, b[2 * q], b[2 * q + 1], 16 * mt, mrows, two, pan[2 * q], pan[2 * q + 1]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

// NVFP4 x: per row, per chunk, the two half-masked copies (xm, M >= 2) or the block-row tiles (M = 1).
void prepare_nvfp4_x(const uint16_t* xb, int64_t M, int64_t kp, uint16_t* xm, uint8_t* tiles) {
  const __mmask32 lo = 0x0000FFFFu, hi = 0xFFFF0000u;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t kc = 0; kc < kp / 32; ++kc) {
      const __m512i v = _mm512_load_si512(xb + m * kp + 32 * kc);
      if (xm != nullptr) {
        uint16_t* out = xm + m * kp * 2 + kc * 64;
        _mm512_store_si512(out, _mm512_maskz_mov_epi16(lo, v));
        _mm512_store_si512(out + 32, _mm512_maskz_mov_epi16(hi, v));
      }
      if (tiles != nullptr) {
        uint8_t* rows = tiles + kc * 1024 + 2 * (kc % 8) * 64;
        _mm512_store_si512(rows, _mm512_maskz_mov_epi16(lo, v));
        _mm512_store_si512(rows + 64, _mm512_maskz_mov_epi16(hi, v));
      }
    }
}

template <class F>
void run(const F& f, const Call& c, int64_t p0, int64_t p1, const uint8_t* m1_tiles) {
  const bool small = c.M <= 16 && !(std::is_same_v<F, PanelNvfp4> && c.M > 1);
  if (small) configure_tiles(std::is_same_v<F, PanelNvfp4> ? 16 : static_cast<int>(c.M), /*b_tiles_23=*/true);
  if constexpr (std::is_same_v<F, PanelNvfp4>) {
    if (small) {
      nvfp4_m1(f, c, m1_tiles, p0, p1);
      return;
    }
  }
  if (!small) {
    for (int64_t pa = p0; pa < p1; pa += 2 * kPairsPerGroup) tiles_of_x(f, c, pa, p1);
    return;
  }
  if constexpr (!std::is_same_v<F, PanelNvfp4>) {
    for (int64_t pa = p0; pa < p1; pa += 2) small_m_chunks(f, c, pa, pa + 1 < p1 ? pa + 1 : pa);
  }
}

}  // namespace

void linear_panels_amx(const float* x, int64_t M, int64_t ldx, const PackedWeight& p, int64_t n0, int64_t n1,
                       float* y, int64_t ldy, float* scratch) {
  if (M <= 0 || n0 >= n1) return;
  const int64_t p0 = n0 / kPanelRows, p1 = (n1 + kPanelRows - 1) / kPanelRows;
  const int64_t kp = p.kp;
  uint8_t* base = panel_align64(scratch);
  auto* xb = reinterpret_cast<uint16_t*>(base);
  base += M * kp * 2;
  panel_prepare_x(x, M, ldx, p.k, kp, xb);
  uint16_t* xm = nullptr;
  uint8_t* m1_tiles = nullptr;
  if (p.format == WeightLayout::kNvfp4) {
    if (M == 1) {
      m1_tiles = block_row_tiles(kp);  // the M = 1 path reads these, not xm
    } else {
      xm = reinterpret_cast<uint16_t*>(base);
      base += M * kp * 4;
    }
    prepare_nvfp4_x(xb, M, kp, xm, m1_tiles);
  }
  uint8_t* stage = base;
  auto* cbuf = reinterpret_cast<float*>(stage + 2 * kPairsPerGroup * kp * 32);
  const Call c{p, M, y, ldy, xb, xm, stage, cbuf, cbuf + 2048};
  switch (p.format) {
    case WeightLayout::kBf16: run(PanelBf16{}, c, p0, p1, nullptr); break;
    case WeightLayout::kFp8Tensor:
    case WeightLayout::kFp8Block: run(PanelFp8{}, c, p0, p1, nullptr); break;
    case WeightLayout::kNvfp4: run(PanelNvfp4{}, c, p0, p1, m1_tiles); break;
    default: break;
  }
  _tile_release();
}

const KernelTable& amx_kernels() {
  static const KernelTable t = [] {
    KernelTable k = avx512bf16_kernels();
    k.linear_packed = linear_panels_amx;
    return k;
  }();
  return t;
}

}  // namespace fp4serve::kernels::cpu
