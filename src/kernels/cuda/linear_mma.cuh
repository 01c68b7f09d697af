// The one kernel family of the CUDA linears (every M, every format, plain and grouped):
// y[m, n] = tensor_scale * sum_k x[m, k] W[n, k], mma.sync m16n8k16 bf16 -> fp32, weights in the
// layout of linear_pack.h dequantized to bf16 in registers.
//
// A block computes 16 rows x 16 columns (two n8 tiles) over the whole K: its 8 warps split the K
// steps (step_warp), each staging nothing but its own weight vectors in registers; the block stages
// x's 16 rows for `chunk_steps` steps at a time in shared memory (zeros past K and past the tile's
// rows). The warps' fp32 partial sums meet in shared memory and are added in warp order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_limits.h"
#include "kernels/cuda/linear_pack.h"

namespace fp4serve::kernels::cuda {

// One weight on the device (also an entry of a grouped linear's expert table).
struct LinearWeightDev {
  const uint4* vecs = nullptr;
  const float* unit_scales = nullptr;  // [units][n_pad] (kFp8Block, kInt4)
  const uint8_t* fp4_scales = nullptr; // kFp4
  float tensor_scale = 1.0f;
};

// A row tile of the grouped launch: rows [row0, row0 + rows) through expert `expert`.
struct LinearTile {
  int32_t expert = 0, row0 = 0, rows = 0, pad = 0;
};

// One output of a launch: its weight (plain launches), where it goes, and its first column block.
struct LinearOutDev {
  LinearWeightDev w;
  float* y = nullptr;  // f32 [rows, ldy]
  int64_t ldy = 0;
  int32_t n = 0, n_pad = 0;
  int32_t first_block = 0;  // blocks [first_block, next output's first_block) of grid.x
};

// Outputs of one plain launch (linears() groups the outputs of one kind up to this many).
inline constexpr int kMaxLaunchOutputs = 4;

struct LinearLaunch {
  LinearOutDev outs[kMaxLaunchOutputs];
  int32_t outputs = 1;
  const LinearWeightDev* table = nullptr;  // grouped: the experts' weights (outs[0] without its w)
  const LinearTile* tiles = nullptr;       // grouped: the row tiles, *tile_count of them
  const int32_t* tile_count = nullptr;
  const uint16_t* x = nullptr;             // bf16 [rows, ldx]
  int64_t ldx = 0;
  int64_t m = 0;                           // rows of x (plain launch)
  int32_t k = 0, steps = 0;
  int32_t unit_tiles = 0;                  // 0: no unit scales
  bool x_vec16 = false;                    // x rows and ldx allow 16-byte loads (k % 8 == 0, aligned)
};

// Dynamic shared memory of one block: x's 16 rows of a chunk (bf16, rows padded by 8 so that the
// fragment reads of the 8 row groups fall in distinct banks); the partial sums reuse it.
__host__ __device__ constexpr int linear_xs_ld(PackedKind kind) { return chunk_steps(kind) * kStepK + 8; }
__host__ __device__ constexpr std::size_t linear_smem_bytes(PackedKind kind) {
  return static_cast<std::size_t>(kBlockM) * linear_xs_ld(kind) * 2;
}
static_assert(linear_smem_bytes(PackedKind::kFp8) <= kMaxSmemPerBlockSm120, "linear smem over sm_120's 99 KB");
static_assert(linear_smem_bytes(PackedKind::kBf16) <= kMaxSmemPerBlockSm120, "linear smem over sm_120's 99 KB");
static_assert(linear_smem_bytes(PackedKind::kFp4) <= kMaxSmemPerBlockSm120, "linear smem over sm_120's 99 KB");
static_assert(static_cast<std::size_t>(kWarpsK) * kBlockTilesN * 4 * 32 * 4 <= linear_smem_bytes(PackedKind::kBf16),
              "the partial sums must fit in the x staging area");

namespace linear_detail {

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int c) {
  return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}

// The two B-fragment registers of k16 tile j from the lane's raw vectors of one step.
template <PackedKind KIND>
__device__ __forceinline__ void b_fragment(const uint4 (&raw)[vecs_per_step(KIND)], uint2 fp4_scales, int j,
                                           uint32_t& b0, uint32_t& b1) {
  uint32_t scale2 = 0;
  if constexpr (KIND == PackedKind::kFp4)
    scale2 = fp4_scale_pair(((j < 4 ? fp4_scales.x : fp4_scales.y) >> (8 * (j % 4))) & 0xFFu);
  const int w0 = fragment_word(KIND, j, 0), w1 = fragment_word(KIND, j, 1);
  b0 = fragment_pair(KIND, word_of(raw[w0 / 4], w0 % 4), j, 0, scale2);
  b1 = fragment_pair(KIND, word_of(raw[w1 / 4], w1 % 4), j, 1, scale2);
}

// Stages x rows [row0, row0 + rows) (rows <= 16), columns [k0, k0 + chunk) into xs[16][XS_LD]:
// zeros past the rows and past K.
template <PackedKind KIND>
__device__ __forceinline__ void stage_x(const LinearLaunch& p, int64_t row0, int rows, int64_t k0, uint16_t* xs) {
  constexpr int kChunk = chunk_steps(KIND) * kStepK, kLd = linear_xs_ld(KIND);
  if (p.x_vec16) {
    constexpr int kVecsPerRow = kChunk / 8;
    for (int idx = threadIdx.x; idx < kBlockM * kVecsPerRow; idx += kLinearThreads) {
      const int r = idx / kVecsPerRow, c = (idx % kVecsPerRow) * 8;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (r < rows && k0 + c < p.k) v = *reinterpret_cast<const uint4*>(p.x + (row0 + r) * p.ldx + k0 + c);
      *reinterpret_cast<uint4*>(xs + r * kLd + c) = v;
    }
  } else {
    for (int idx = threadIdx.x; idx < kBlockM * kChunk; idx += kLinearThreads) {
      const int r = idx / kChunk, c = idx % kChunk;
      xs[r * kLd + c] = (r < rows && k0 + c < p.k) ? p.x[(row0 + r) * p.ldx + k0 + c] : uint16_t{0};
    }
  }
}

}  // namespace linear_detail

// Grid: x = the outputs' n_pad / 16 column blocks one after the other, y = row tiles (plain: ceil(M / 16); grouped: the tile bound,
// blocks past *tile_count return at once). Block: kLinearThreads. Dynamic smem: linear_smem_bytes.
template <PackedKind KIND, bool UNITS>
__global__ void __launch_bounds__(kLinearThreads) linear_mma_kernel(const LinearLaunch p) {
  using namespace linear_detail;
  constexpr int kVecs = vecs_per_step(KIND), kTurn = steps_per_turn(KIND), kChunkSteps = chunk_steps(KIND);
  constexpr int kLd = linear_xs_ld(KIND);
  extern __shared__ uint4 linear_smem[];
  uint16_t* xs = reinterpret_cast<uint16_t*>(linear_smem);

  // The block's output (selected with constant indices only: a dynamic index into the parameter
  // array would copy it to local memory), weight and rows, all uniform over the block (an early
  // return skips every barrier).
  LinearOutDev out = p.outs[0];
#pragma unroll
  for (int o = 1; o < kMaxLaunchOutputs; ++o)
    if (o < p.outputs && static_cast<int>(blockIdx.x) >= p.outs[o].first_block) out = p.outs[o];
  LinearWeightDev wt = out.w;
  int64_t row0;
  int rows;
  if (p.tiles != nullptr) {
    if (static_cast<int>(blockIdx.y) >= *p.tile_count) return;
    const LinearTile tile = p.tiles[blockIdx.y];
    wt = p.table[tile.expert];
    row0 = tile.row0;
    rows = tile.rows;
  } else {
    row0 = static_cast<int64_t>(blockIdx.y) * kBlockM;
    const int64_t left = p.m - row0;
    rows = left < kBlockM ? static_cast<int>(left) : kBlockM;
  }

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t tile0 = static_cast<int64_t>(static_cast<int>(blockIdx.x) - out.first_block) * kBlockTilesN;

  float acc[kBlockTilesN][4];
  float part[kBlockTilesN][4];
#pragma unroll
  for (int nt = 0; nt < kBlockTilesN; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[nt][c] = part[nt][c] = 0.0f;

  for (int64_t c0 = 0; c0 < p.steps; c0 += kChunkSteps) {
    // This warp's steps of the chunk: c0 + warp * kTurn + r (step_warp's rule), loaded before the
    // barrier so that the loads overlap the staging of x.
    uint4 raw[kTurn][kBlockTilesN][kVecs];
    uint2 fp4s[kTurn][kBlockTilesN];
#pragma unroll
    for (int r = 0; r < kTurn; ++r) {
      const int64_t s = c0 + warp * kTurn + r;
#pragma unroll
      for (int nt = 0; nt < kBlockTilesN; ++nt) {
        fp4s[r][nt] = make_uint2(0u, 0u);
#pragma unroll
        for (int q = 0; q < kVecs; ++q) raw[r][nt][q] = make_uint4(0u, 0u, 0u, 0u);
        if (s < p.steps) {
#pragma unroll
          for (int q = 0; q < kVecs; ++q) raw[r][nt][q] = __ldg(wt.vecs + vector_index(tile0 + nt, p.steps, s, kVecs, q, lane));
          if constexpr (KIND == PackedKind::kFp4)
            fp4s[r][nt] = __ldg(reinterpret_cast<const uint2*>(wt.fp4_scales + fp4_scale_index(tile0 + nt, p.steps, s, g)));
        }
      }
    }
    __syncthreads();  // the previous chunk's fragment reads are done
    stage_x<KIND>(p, row0, rows, c0 * kStepK, xs);
    __syncthreads();

#pragma unroll
    for (int r = 0; r < kTurn; ++r) {
      const int64_t s = c0 + warp * kTurn + r;
      if (s >= p.steps) break;  // warp-uniform
      const int kbase = (warp * kTurn + r) * kStepK;
#pragma unroll
      for (int j = 0; j < kTilesPerStep; ++j) {
        const int kk = kbase + j * 16 + 2 * t;
        uint32_t a[4];
        a[0] = *reinterpret_cast<const uint32_t*>(xs + g * kLd + kk);
        a[1] = *reinterpret_cast<const uint32_t*>(xs + (g + 8) * kLd + kk);
        a[2] = *reinterpret_cast<const uint32_t*>(xs + g * kLd + kk + 8);
        a[3] = *reinterpret_cast<const uint32_t*>(xs + (g + 8) * kLd + kk + 8);
#pragma unroll
        for (int nt = 0; nt < kBlockTilesN; ++nt) {
          uint32_t b0, b1;
          b_fragment<KIND>(raw[r][nt], fp4s[r][nt], j, b0, b1);
          if constexpr (UNITS)
            mma_bf16(part[nt], a, b0, b1);
          else
            mma_bf16(acc[nt], a, b0, b1);
        }
        if constexpr (UNITS) {
          if ((j + 1) % p.unit_tiles == 0) {
            // The unit's partial sums into the accumulator: columns 2t and 2t + 1 of each n8 tile.
            const int64_t u = unit_of(s, j, p.unit_tiles);
#pragma unroll
            for (int nt = 0; nt < kBlockTilesN; ++nt) {
              const float2 sc =
                  __ldg(reinterpret_cast<const float2*>(wt.unit_scales + u * out.n_pad + (tile0 + nt) * kTileN + 2 * t));
              acc[nt][0] = fmaf(part[nt][0], sc.x, acc[nt][0]);
              acc[nt][1] = fmaf(part[nt][1], sc.y, acc[nt][1]);
              acc[nt][2] = fmaf(part[nt][2], sc.x, acc[nt][2]);
              acc[nt][3] = fmaf(part[nt][3], sc.y, acc[nt][3]);
#pragma unroll
              for (int c = 0; c < 4; ++c) part[nt][c] = 0.0f;
            }
          }
        }
      }
    }
  }

  // The warps' partial sums, added in warp order (only warps that own steps).
  __syncthreads();
  float* red = reinterpret_cast<float*>(linear_smem);  // [kWarpsK][kBlockTilesN * 4][32]
#pragma unroll
  for (int nt = 0; nt < kBlockTilesN; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) red[(warp * kBlockTilesN * 4 + nt * 4 + c) * 32 + lane] = acc[nt][c];
  __syncthreads();
  constexpr int kOutputs = kBlockTilesN * 4 * 32;  // one per thread (kLinearThreads == kOutputs)
  static_assert(kOutputs == kLinearThreads, "one output value per thread");
  const int reg = static_cast<int>(threadIdx.x) / 32, l = static_cast<int>(threadIdx.x) % 32;
  const int used = warps_used(p.steps, KIND);
  float v = red[reg * 32 + l];
  for (int w = 1; w < used; ++w) v = v + red[(w * kBlockTilesN * 4 + reg) * 32 + l];
  v = v * wt.tensor_scale;
  // C fragment: register c of n8 tile nt holds row (l / 4) + 8 (c / 2), column 2 (l % 4) + c % 2.
  const int nt = reg / 4, c = reg % 4;
  const int row = (l >> 2) + (c >> 1) * 8;
  const int64_t col = (tile0 + nt) * kTileN + 2 * (l & 3) + (c & 1);
  if (row < rows && col < out.n) out.y[(row0 + row) * out.ldy + col] = v;
}

}  // namespace fp4serve::kernels::cuda
