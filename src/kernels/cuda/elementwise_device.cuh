// Device helpers shared by the element-wise, norm and RoPE kernels: bf16 conversions with the CPU's
// exact rounding (tensor/float_formats.h), the CPU's canonical 32-lane dot as one warp, row copies,
// and grid sizing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/float_bits.h"

// A nested namespace: helpers of the element-wise, norm and RoPE files, apart from other ops' names.
namespace fp4serve::kernels::cuda::elem {

// bf16 <-> f32 with the CPU's rounding (float_bits.h: round to nearest even, NaN kept and made quiet,
// where __float2bfloat16_rn returns a canonical NaN).
__device__ __forceinline__ float bf16_to_f32(uint16_t b) { return bits::bf16_value(b); }
__device__ __forceinline__ uint16_t f32_to_bf16(float x) { return bits::bf16_bits(x); }
__device__ __forceinline__ float round_bf16(float x) { return bits::round_bf16(x); }

// Two bf16 values of a 32-bit word (little-endian: the lower address in the low half).
__device__ __forceinline__ float lo_bf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_bf16(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return static_cast<uint32_t>(f32_to_bf16(lo)) | (static_cast<uint32_t>(f32_to_bf16(hi)) << 16);
}

// The canonical dot's (kernel_table.h) halving tree over a warp: lane l holds acc[l]; the result is
// h[0] + h[1] after h[i] = acc[i] + acc[i + 16], h[i] += h[i + 8], ... , returned to every lane.
__device__ __forceinline__ float warp_canonical_reduce(float acc) {
  acc += __shfl_down_sync(0xFFFFFFFFu, acc, 16);
  acc += __shfl_down_sync(0xFFFFFFFFu, acc, 8);
  acc += __shfl_down_sync(0xFFFFFFFFu, acc, 4);
  acc += __shfl_down_sync(0xFFFFFFFFu, acc, 2);
  acc += __shfl_down_sync(0xFFFFFFFFu, acc, 1);
  return __shfl_sync(0xFFFFFFFFu, acc, 0);
}

// sum(x[k]^2) of a bf16 row of n elements by one warp, in the CPU's canonical order:
// acc[k % 32] = fma(x[k], x[k], acc[k % 32]) over k, lane l owning acc[l], then the halving tree.
// The order forbids splitting a row over warps, so latency is hidden by issuing sixteen loads per
// lane (512 elements per warp) before their fmas: a 2048-wide row is four rounds of loads.
__device__ __forceinline__ float warp_sum_squares_bf16(const uint16_t* x, int n, int lane) {
  constexpr int kBatch = 16;
  float acc = 0.0f;
  int k = lane;
  for (; k + (kBatch - 1) * 32 < n; k += kBatch * 32) {
    float v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) v[j] = bf16_to_f32(x[k + 32 * j]);
#pragma unroll
    for (int j = 0; j < kBatch; ++j) acc = fmaf(v[j], v[j], acc);
  }
  for (; k < n; k += 32) {
    const float v = bf16_to_f32(x[k]);
    acc = fmaf(v, v, acc);
  }
  return warp_canonical_reduce(acc);
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// dst[0, n) = src[0, n) (bf16) by one warp: 16-byte moves when both rows allow them.
__device__ __forceinline__ void warp_copy_row_bf16(uint16_t* dst, const uint16_t* src, int64_t n, int lane) {
  if (n % 8 == 0 && aligned16(dst) && aligned16(src)) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int64_t i = lane; i < n / 8; i += 32) d[i] = s[i];
  } else {
    for (int64_t i = lane; i < n; i += 32) dst[i] = src[i];
  }
}

__device__ __forceinline__ void warp_zero_row_bf16(uint16_t* dst, int64_t n, int lane) {
  for (int64_t i = lane; i < n; i += 32) dst[i] = 0;
}

// Blocks for `items` work items of `per_block` each, capped at a few waves over the SMs (the kernels
// loop grid-stride over the rest).
inline unsigned grid_for(const CudaContext& ctx, int64_t items, int per_block, int waves = 8) {
  const int64_t want = (items + per_block - 1) / per_block;
  const int64_t cap = static_cast<int64_t>(std::max(ctx.info.sm_count, 1)) * waves;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(want, cap)));
}

}  // namespace fp4serve::kernels::cuda::elem
