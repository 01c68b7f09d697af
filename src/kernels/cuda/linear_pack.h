// The CUDA linears' weight layout: what prepare_linear repacks a checkpoint weight into (host code,
// linear_pack.cpp) and how the mma kernel (linear_mma.cuh) reads it back. The index math and the
// per-format decoders are __host__ __device__ functions in this header, used by both sides, so the
// CPU test (tests/unit/kernels/cuda_linear_pack_test.cpp) that reads a packed weight back through
// them checks the kernel's own addressing.
//
// The kernel computes y[m, n] = sum_k x[m, k] W[n, k] with mma.sync m16n8k16 (bf16 in, fp32 out).
// W is cut into n8 tiles (8 output columns) and K steps of 128 (8 mma k16 tiles). For one
// (n8 tile, step), lane l of a warp holds, for each k16 tile j (0..7), the 4 values of its mma B
// fragment: column n = l / 4, rows k = 16 j + 2 (l % 4) + {0, 1, 8, 9} (value i = 0..3). Those
// 32 values fill the lane's 16-byte vectors (bf16 4 vectors, fp8 2, 4-bit 1 per step), value
// (j, i) in word value_word at the bits place_code gives (per kind, below). Vector q of lane l of
// (tile, step) is vecs[((tile * steps + step) * vecs_per_step + q) * 32 + l]: a warp's loads of a
// step are contiguous 512-byte lines.
//
// Every value is exact in bf16 after decoding (bf16; e4m3; e2m1 * e4m3 block scale; q - 8), so the
// mma sees the weight's true numbers. Scales that are not exact in bf16 multiply fp32 partial sums:
//   kFp8Block, kInt4*  one fp32 scale per (scale unit, column): a unit is 128 K (fp8 blocks; int4
//                      groups of 128 or more, a larger group's scale repeated per 128) or the
//                      group (int4 groups of 16, 32 or 64). The unit's mma partial sum (from 0)
//                      goes into the accumulator with one fmaf(partial, scale, acc).
//   kFp8Tensor, kNvfp4 tensor_scale (weight_scale_2) multiplies the final fp32 sum.
// NVFP4's e4m3 block scales (one per 16 K, i.e. per mma k16 tile) travel beside the vectors: 8 bytes
// per (tile, step, column), byte j for k16 tile j.
//
// Batch invariance: the steps are split over the kWarpsK warps of a block by a rule of the step
// index alone (step_warp), each warp sums its steps in increasing order, and the warps' partial
// sums are added in warp order. Nothing depends on M or on which rows share a tile (mma rows are
// independent), so a row's bits are the same alone, in any batch, and in the grouped (MoE) launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/float_bits.h"
#include "kernels/weights.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

#if defined(__CUDACC__)
#define FP4_LINEAR_HD __host__ __device__ __forceinline__
#else
#define FP4_LINEAR_HD inline
#endif

namespace fp4serve::kernels::cuda {

// The kernel's decoders, one template instantiation each (kFp8Tensor and kFp8Block share kFp8;
// kInt4Gptq and kInt4Packed share kInt4).
enum class PackedKind : int { kBf16 = 0, kFp8 = 1, kFp4 = 2, kInt4 = 3 };

inline constexpr int kStepK = 128;       // K per step
inline constexpr int kTilesPerStep = 8;  // mma k16 tiles per step
inline constexpr int kTileN = 8;         // output columns of an mma n8 tile
inline constexpr int kBlockTilesN = 2;   // n8 tiles per block
inline constexpr int kBlockN = kBlockTilesN * kTileN;
inline constexpr int kBlockM = 16;       // rows of a block (one mma m16 tile)
inline constexpr int kWarpsK = 8;        // warps per block; they split the steps
inline constexpr int kLinearThreads = kWarpsK * 32;

FP4_LINEAR_HD constexpr int value_bits(PackedKind kind) {
  return kind == PackedKind::kBf16 ? 16 : kind == PackedKind::kFp8 ? 8 : 4;
}
// 16-byte vectors per lane per step (32 values of value_bits): 4, 2 or 1.
FP4_LINEAR_HD constexpr int vecs_per_step(PackedKind kind) { return value_bits(kind) / 4; }
// Consecutive steps a warp takes at a time (so that each warp has about 2 KB of loads in flight).
FP4_LINEAR_HD constexpr int steps_per_turn(PackedKind kind) { return kind == PackedKind::kBf16 ? 1 : 2; }
// Steps of K one block stages x for at a time: every warp's turn.
FP4_LINEAR_HD constexpr int chunk_steps(PackedKind kind) { return steps_per_turn(kind) * kWarpsK; }

// The warp of a block that sums step s (each warp then in increasing s): depends on s alone.
FP4_LINEAR_HD int step_warp(int64_t s, PackedKind kind) {
  return static_cast<int>((s / steps_per_turn(kind)) % kWarpsK);
}
// Warps that own at least one step of a K of `steps` steps (the ones whose partials are summed).
FP4_LINEAR_HD int warps_used(int64_t steps, PackedKind kind) {
  const int64_t turns = (steps + steps_per_turn(kind) - 1) / steps_per_turn(kind);
  return static_cast<int>(turns < kWarpsK ? turns : kWarpsK);
}

// Offsets inside one (n8 tile, step) of value i (0..3) of k16 tile j of lane l: the mma B fragment.
FP4_LINEAR_HD int value_dn(int lane) { return lane >> 2; }
FP4_LINEAR_HD int value_dk(int lane, int j, int i) { return j * 16 + 2 * (lane & 3) + (i & 1) + (i >> 1) * 8; }
// The lane's 32-bit word (0 .. 4 * vecs - 1) holding value (j, i): bf16 2j + i/2, fp8 j, 4-bit j/2.
FP4_LINEAR_HD int value_word(int bits, int j, int i) { return ((j * 4 + i) * bits) >> 5; }
// Index of the 16-byte vector q of lane l of (n8 tile, step).
FP4_LINEAR_HD int64_t vector_index(int64_t tile, int64_t steps, int64_t step, int vecs, int q, int lane) {
  return ((tile * steps + step) * vecs + q) * 32 + lane;
}
// Byte index of the 8 NVFP4 block-scale bytes of column dn (0..7) of (n8 tile, step).
FP4_LINEAR_HD int64_t fp4_scale_index(int64_t tile, int64_t steps, int64_t step, int dn) {
  return ((tile * steps + step) * kTileN + dn) * kTilesPerStep;
}
// The scale unit (kFp8Block, kInt4) k16 tile j of step s falls in, for units of `unit_tiles` tiles.
FP4_LINEAR_HD int64_t unit_of(int64_t step, int j, int unit_tiles) {
  return step * (kTilesPerStep / unit_tiles) + j / unit_tiles;
}

// Where value (j, i)'s bits lie in its word, per kind. A B register is a pair of values (i = 2b,
// 2b + 1), b = 0, 1; the 4-bit kinds keep tile j's pairs so that one pair decodes with a few bit
// operations (Marlin's idea):
//   kBf16  bits 16 (i % 2) of word 2j + i/2          (the register itself)
//   kFp8   bits 8 i of word j                         (a pair is one 16-bit half: cvt e4m3x2)
//   kInt4  bits 4 p + 16 (i % 2) of word j/2, p = 2 (j % 2) + i/2: a pair at 4p and 4p + 16
//   kFp4   magnitude (3 bits) at 16 (j % 2) + 4 i of word j/2 (nibble-aligned: a byte-permute
//          lookup), sign at bit 15 - 4p + 16 (i % 2): a pair's signs land on its two bf16 sign bits
//          after a shift by 4p.
FP4_LINEAR_HD int int4_shift(int j, int i) { return 4 * (2 * (j & 1) + (i >> 1)) + 16 * (i & 1); }
FP4_LINEAR_HD int fp4_mag_shift(int j, int i) { return 16 * (j & 1) + 4 * i; }
FP4_LINEAR_HD int fp4_sign_bit(int j, int i) { return 15 - 4 * (2 * (j & 1) + (i >> 1)) + 16 * (i & 1); }
// The bits value (j, i) with code `code` contributes to its word (codes: bf16 bits, e4m3 byte,
// int4 q, e2m1 nibble).
FP4_LINEAR_HD uint32_t place_code(PackedKind kind, int j, int i, uint32_t code) {
  switch (kind) {
    case PackedKind::kBf16:
      return (code & 0xFFFFu) << (16 * (i & 1));
    case PackedKind::kFp8:
      return (code & 0xFFu) << (8 * i);
    case PackedKind::kInt4:
      return (code & 0xFu) << int4_shift(j, i);
    case PackedKind::kFp4:
      return ((code & 7u) << fp4_mag_shift(j, i)) | (((code >> 3) & 1u) << fp4_sign_bit(j, i));
  }
  return 0;
}
// The word (0 .. 4 * vecs - 1) holding pair b of tile j.
FP4_LINEAR_HD int fragment_word(PackedKind kind, int j, int b) {
  return kind == PackedKind::kBf16 ? 2 * j + b : kind == PackedKind::kFp8 ? j : j / 2;
}

// ---- decoders (exact; shared by the kernel and the host read-back) ------------------------------
FP4_LINEAR_HD float bits_to_float(uint32_t u) { return bits::bits_f32(u); }

// OCP e4m3fn: bias 7, subnormals m * 2^-9, NaN 0x7F/0xFF (no Inf).
FP4_LINEAR_HD float decode_e4m3(uint32_t b) {
  const uint32_t sign = (b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if ((b & 0x7Fu) == 0x7Fu) return bits_to_float(sign | 0x7FC00000u);
  if (e == 0) {
    const float v = static_cast<float>(m) * 0.001953125f;  // exact: m * 2^-9
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((e + 120u) << 23) | (m << 20));
}

#if !defined(__CUDA_ARCH__)
// Host twins of the device instructions the decoders use.
inline uint32_t host_float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// bf16 of an fp32 (round to nearest even; every use here is exact).
inline uint32_t host_bf16_bits(float f) {
  uint32_t u = host_float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (u >> 16) | 0x40u;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return u >> 16;
}
// bf16x2 lane-wise op (exactly representable results: the fp32 op is the bf16 op).
template <class Op>
uint32_t host_bf16x2(uint32_t a, uint32_t b, Op op) {
  const float lo = op(bits_to_float(a << 16), bits_to_float(b << 16));
  const float hi = op(bits_to_float(a & 0xFFFF0000u), bits_to_float(b & 0xFFFF0000u));
  return host_bf16_bits(lo) | (host_bf16_bits(hi) << 16);
}
#endif

// PTX prmt (default mode): byte i of the result is byte (s >> 4i) & 7 of {b:a}, or that byte's sign
// replicated when bit 3 of the selector nibble is set.
FP4_LINEAR_HD uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, s);
#else
  const uint64_t pool = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t sel = (s >> (4 * i)) & 0xFu;
    uint32_t byte = static_cast<uint32_t>(pool >> (8 * (sel & 7u))) & 0xFFu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    r |= byte << (8 * i);
  }
  return r;
#endif
}

FP4_LINEAR_HD uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  const __nv_bfloat162 r = __hmul2_rn(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
#else
  return host_bf16x2(a, b, [](float x, float y) { return x * y; });
#endif
}

FP4_LINEAR_HD uint32_t bf16x2_sub(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  const __nv_bfloat162 r = __hsub2_rn(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
#else
  return host_bf16x2(a, b, [](float x, float y) { return x - y; });
#endif
}

// Two e4m3 codes (low byte = low half) to bf16x2, exactly (the device converts through f16, which
// holds every e4m3 value).
FP4_LINEAR_HD uint32_t e4m3x2_to_bf16x2(uint32_t two) {
#if defined(__CUDA_ARCH__)
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two & 0xFFFFu), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  const __nv_bfloat162 r = __floats2bfloat162_rn(f.x, f.y);
  return *reinterpret_cast<const uint32_t*>(&r);
#else
  return host_bf16_bits(decode_e4m3(two & 0xFFu)) | (host_bf16_bits(decode_e4m3((two >> 8) & 0xFFu)) << 16);
#endif
}

// The NVFP4 block scale of a tile as bf16x2 {s, s} (exact: e4m3 fits in bf16).
FP4_LINEAR_HD uint32_t fp4_scale_pair(uint32_t scale_byte) {
  const uint32_t s = e4m3x2_to_bf16x2(scale_byte & 0xFFu) & 0xFFFFu;
  return s | (s << 16);
}

// bf16 of |e2m1| for magnitude codes 0..7 {0, .5, 1, 1.5, 2, 3, 4, 6}: high bytes of codes 0-3 and
// 4-7, low bytes of codes 0-3 and 4-7 (prmt lookup tables).
inline constexpr uint32_t kE2m1HiA = 0x3F3F3F00u, kE2m1HiB = 0x40404040u;
inline constexpr uint32_t kE2m1LoA = 0xC0800000u, kE2m1LoB = 0xC0804000u;

// Register b (values 2b, 2b + 1) of k16 tile j's B fragment, from the word fragment_word(kind, j, b)
// (kFp4: scale2 = fp4_scale_pair of the tile's block scale). Every result is exact in bf16.
FP4_LINEAR_HD uint32_t fragment_pair(PackedKind kind, uint32_t word, int j, int b, uint32_t scale2) {
  switch (kind) {
    case PackedKind::kBf16:
      return word;
    case PackedKind::kFp8:
      return e4m3x2_to_bf16x2(word >> (16 * b));
    case PackedKind::kInt4: {
      // bf16 0x4300 | q is 128 + q (q < 16 fits the 7 mantissa bits); minus 136 gives q - 8.
      const int p = 2 * (j & 1) + b;
      return bf16x2_sub(((word >> (4 * p)) & 0x000F000Fu) | 0x43004300u, 0x43084308u);
    }
    case PackedKind::kFp4: {
      const int p = 2 * (j & 1) + b;
      const uint32_t sel = (word >> (16 * (j & 1))) & 0x7777u;  // the tile's 4 magnitude codes
      const uint32_t hi = byte_perm(kE2m1HiA, kE2m1HiB, sel), lo = byte_perm(kE2m1LoA, kE2m1LoB, sel);
      // {lo, hi} bytes of values 2b and 2b + 1 -> one bf16x2; then the two signs.
      const uint32_t mag = byte_perm(lo, hi, b == 0 ? 0x5140u : 0x7362u);
      return bf16x2_mul(mag | ((word << (4 * p)) & 0x80008000u), scale2);
    }
  }
  return 0;
}

// ---- the grouped (MoE) launch's row tiles ----------------------------------------------------
// Rows [begin, end) of expert e for offsets [E + 1] over x of `rows` rows, clamped to [0, rows] with
// end >= begin, so that bad offsets can never address rows outside x (overlapping ranges would write
// a row twice, never outside; the tile list is capped at grouped_tile_bound).
FP4_LINEAR_HD void expert_rows(const int32_t* offsets, int e, int64_t rows, int64_t* begin, int64_t* end) {
  auto clamp = [rows](int64_t v) { return v < 0 ? int64_t{0} : v > rows ? rows : v; };
  const int64_t b = clamp(offsets[e]), en = clamp(offsets[e + 1]);
  *begin = b;
  *end = en < b ? b : en;
}
// An upper bound of the tiles of any split of `rows` rows over `experts` experts (no host read-back:
// the grid is sized by it): sum over experts of ceil(r_e / 16) <= rows / 16 + (non-empty experts).
FP4_LINEAR_HD int64_t grouped_tile_bound(int64_t rows, int64_t experts) {
  return (rows + kBlockM - 1) / kBlockM + (experts < rows ? experts : rows);
}

// ---- host side --------------------------------------------------------------------------------
// A weight's packed geometry and the sizes of its three arrays. Each array is tile- or unit-major,
// so that a range of column tiles (words, NVFP4 block scales) or of scale units (unit scales) is
// one contiguous byte range: the loader (weight_upload.h) packs a weight in such pieces straight
// into its pinned staging buffers, never holding the whole packed weight on the host.
struct PackedShape {
  WeightLayout format = WeightLayout::kBf16;
  PackedKind kind = PackedKind::kBf16;
  int64_t n = 0, k = 0;
  int64_t n_tiles = 0;  // n8 tiles, a multiple of kBlockTilesN (n_pad = n_tiles * 8)
  int64_t steps = 0;    // K steps of 128 (k_pad = steps * 128)
  int unit_tiles = 0;   // k16 tiles per scale unit (1, 2, 4 or 8); 0: no unit scales
  float tensor_scale = 1.0f;
  int64_t n_pad() const { return n_tiles * kTileN; }
  int64_t units() const { return unit_tiles ? steps * (kTilesPerStep / unit_tiles) : 0; }
  // words: [n_tiles][steps][vecs][32 lanes] 16-byte vectors (vector_index).
  std::size_t word_bytes_per_tile() const {
    return static_cast<std::size_t>(steps) * static_cast<std::size_t>(vecs_per_step(kind)) * 32 * 16;
  }
  // kFp4's block scales: [n_tiles][steps][8 columns][8 k16 tiles] e4m3 codes; 0 for other kinds.
  std::size_t fp4_scale_bytes_per_tile() const {
    return kind == PackedKind::kFp4 ? static_cast<std::size_t>(steps) * kTileN * kTilesPerStep : 0;
  }
  // unit scales: [units][n_pad] fp32; 0 without units.
  std::size_t unit_scale_bytes_per_unit() const { return unit_tiles ? static_cast<std::size_t>(n_pad()) * 4 : 0; }
  std::size_t word_bytes() const { return static_cast<std::size_t>(n_tiles) * word_bytes_per_tile(); }
  std::size_t fp4_scale_bytes() const { return static_cast<std::size_t>(n_tiles) * fp4_scale_bytes_per_tile(); }
  std::size_t unit_scale_bytes() const { return static_cast<std::size_t>(units()) * unit_scale_bytes_per_unit(); }
};

PackedKind packed_kind(WeightLayout format);

// The packed geometry of a host view (any WeightLayout). Throws std::invalid_argument naming the
// weight's shape for what the kernel cannot take (an empty weight, missing scales, an int4 group
// that is neither a divisor of 128 that is a multiple of 16 nor a multiple of 128).
PackedShape packed_shape(const WeightView& w);

// The packers, each writing a range of one array into caller memory (every byte of the range is
// written, padding included), from the host view `w` that `s` was made from:
//   pack_words_into        column tiles [tile0, tile1): (tile1 - tile0) * s.word_bytes_per_tile() bytes
//   pack_fp4_scales_into   column tiles [tile0, tile1): (tile1 - tile0) * s.fp4_scale_bytes_per_tile() bytes
//   pack_unit_scales_into  scale units  [unit0, unit1): (unit1 - unit0) * s.unit_scale_bytes_per_unit() bytes
// A range's bytes are the same whatever the other ranges: packing [0, a) and [a, b) equals [0, b).
void pack_words_into(const PackedShape& s, const WeightView& w, int64_t tile0, int64_t tile1, void* dst);
void pack_fp4_scales_into(const PackedShape& s, const WeightView& w, int64_t tile0, int64_t tile1, void* dst);
void pack_unit_scales_into(const PackedShape& s, const WeightView& w, int64_t unit0, int64_t unit1, void* dst);

// A whole weight packed into host vectors: the CPU tests' read-back form (the loader packs in pieces
// into its staging buffers instead).
struct PackedLinear : PackedShape {
  std::vector<uint32_t> words;         // the vectors, 4 words each (vector_index * 4 + word % 4)
  std::vector<float> unit_scales;      // [units][n_pad], units = steps * 8 / unit_tiles
  std::vector<uint8_t> fp4_scales;     // kFp4: [n_tiles][steps][8][8] e4m3 codes
};

// packed_shape and the three packers over their whole ranges.
PackedLinear pack_linear(const WeightView& w);

// The value the kernel's B register holds for value i of k16 tile j of lane `lane` of (tile, step)
// (bf16-exact, unit scale not applied), read back through fragment_word and fragment_pair.
float packed_fragment_value(const PackedLinear& p, int64_t tile, int64_t step, int lane, int j, int i);
// The dequantized W(n, k) the kernel uses: packed_fragment_value at (n, k) times the unit scale
// where there is one; tensor_scale not applied (as dequantize_rows_unscaled). (n, k) in the padded
// range reads as 0.
float packed_weight_value(const PackedLinear& p, int64_t n, int64_t k);

// linears(): which outputs share a launch. Outputs with the same kernel instantiation (kind, and
// unit_tiles, which is 0 or not per instantiation and must be equal within a launch) go together
// in their order, at most `max_per_launch` per launch; each launch lists its outputs' indices.
struct LaunchKey {
  PackedKind kind = PackedKind::kBf16;
  int unit_tiles = 0;
};
std::vector<std::vector<int>> plan_launches(const std::vector<LaunchKey>& outputs, int max_per_launch);

}  // namespace fp4serve::kernels::cuda
