// The norms on CUDA, one warp per row (norm_cuda.h). The sums of squares of the RMSNorms are the CPU's
// canonical dot (kernel_table.h) done by the warp in the same order, the per-element math is the CPU
// op's operation for operation (norm_cpu.cpp, vision_cpu.cpp), so RMSNorm and the gated RMSNorm give
// the CPU's bits. LayerNorm's moments are double sums, which the CPU adds sequentially and the warp
// adds lane-strided then by a tree: the double results may differ in their last bits, which changes
// the fp32 mean or variance only when those lie within a few double ulps of an fp32 rounding
// boundary (about 1 row in 10^8); every output row is still one fixed-order computation.
#include <cuda_runtime.h>

#include <initializer_list>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/elementwise_device.cuh"
#include "kernels/cuda/elementwise_math.h"
#include "kernels/cuda/graph_launch.cuh"
#include "kernels/cuda/norm_cuda.h"

namespace fp4serve::kernels::cuda {
namespace {

using namespace elem;  // elementwise_device.cuh, elementwise_math.h, rope_math.h

constexpr int kWarpsPerBlock = 4;  // rows per block
constexpr int kThreads = kWarpsPerBlock * 32;

// A row's elements, eight per lane, as the 16-byte vectors of the output pass: lane l takes
// elements [8 l, 8 l + 8) of each 256-element stretch. Element order does not matter there.
struct Vec8 {
  float v[8];
};

__device__ __forceinline__ Vec8 load8_bf16(const uint16_t* p) {
  const uint4 q = *reinterpret_cast<const uint4*>(p);
  return {{lo_bf16(q.x), hi_bf16(q.x), lo_bf16(q.y), hi_bf16(q.y), lo_bf16(q.z), hi_bf16(q.z), lo_bf16(q.w),
           hi_bf16(q.w)}};
}
__device__ __forceinline__ Vec8 load8_f32(const float* p) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  return {{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
}
__device__ __forceinline__ void store8_bf16(uint16_t* p, const Vec8& v) {
  *reinterpret_cast<uint4*>(p) =
      make_uint4(pack_bf16(v.v[0], v.v[1]), pack_bf16(v.v[2], v.v[3]), pack_bf16(v.v[4], v.v[5]), pack_bf16(v.v[6], v.v[7]));
}

// Rows of up to kStageElems elements that allow 16-byte loads are first copied into the warp's slice
// of shared memory with every load issued at once (one latency instead of one per batch of the
// canonical order's strided loads); both passes then read the row from there.
constexpr int kStageElems = 2048;  // the model's hidden size: 4 KB per warp, 16 KB per block
constexpr int kStageVecs = kStageElems / 8;

// The row x[0, n) (16-byte aligned, n a multiple of 8 and <= kStageElems) into `stage`; returns it.
__device__ __forceinline__ const uint16_t* stage_row(uint4* stage, const uint16_t* x, int n, int lane) {
  const uint4* src = reinterpret_cast<const uint4*>(x);
#pragma unroll
  for (int j = 0; j < kStageVecs / 32; ++j) {
    const int v = lane + 32 * j;
    if (v < n / 8) stage[v] = src[v];
  }
  __syncwarp();
  return reinterpret_cast<const uint16_t*>(stage);
}

// x and out may alias (in place): no __restrict__ on them. Every lane has read the whole row (the
// sum of squares ends in the warp's shuffles) before any lane writes it, and in the output pass each
// element is read and written by the same lane.
__global__ void rmsnorm_kernel(const uint16_t* x, const float* __restrict__ w, int64_t rows, int D, float eps,
                               uint16_t* out, bool vec) {
  __shared__ uint4 stage[kWarpsPerBlock][kStageVecs];
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp; no block-wide barrier follows
  const uint16_t* xr = x + row * D;
  uint16_t* o = out + row * D;
  if (vec && D <= kStageElems) xr = stage_row(stage[threadIdx.x / 32], xr, D, lane);
  const float ss = warp_sum_squares_bf16(xr, D, lane);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
  if (vec) {
    for (int k = lane * 8; k < D; k += 256) {
      Vec8 v = load8_bf16(xr + k);
      const Vec8 wv = load8_f32(w + k);
#pragma unroll
      for (int j = 0; j < 8; ++j) v.v[j] = (v.v[j] * inv) * (1.0f + wv.v[j]);
      store8_bf16(o + k, v);
    }
  } else {
    for (int k = lane; k < D; k += 32) o[k] = f32_to_bf16((bf16_to_f32(xr[k]) * inv) * (1.0f + w[k]));
  }
}

// norm_cpu.h's rmsnorm_gated: n = bf16(x r); y = bf16(w n); out = bf16(y silu(z)).
__device__ __forceinline__ float gated(float x, float inv, float w, float z) {
  const float n = round_bf16(x * inv);
  const float y = round_bf16(w * n);
  return y * silu_f32(z);
}

__global__ void rmsnorm_gated_kernel(const uint16_t* x, const uint16_t* z, const float* __restrict__ w, int64_t rows,
                                     int D, float eps, uint16_t* out, bool vec) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const uint16_t* xr = x + row * D;
  const uint16_t* zr = z + row * D;
  uint16_t* o = out + row * D;
  // GDN's rows are 128 wide (four loads per lane): not staged, no shared memory to limit occupancy.
  const float ss = warp_sum_squares_bf16(xr, D, lane);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
  if (vec) {
    for (int k = lane * 8; k < D; k += 256) {
      Vec8 v = load8_bf16(xr + k);
      const Vec8 zv = load8_bf16(zr + k), wv = load8_f32(w + k);
#pragma unroll
      for (int j = 0; j < 8; ++j) v.v[j] = gated(v.v[j], inv, wv.v[j], zv.v[j]);
      store8_bf16(o + k, v);
    }
  } else {
    for (int k = lane; k < D; k += 32) o[k] = f32_to_bf16(gated(bf16_to_f32(xr[k]), inv, w[k], bf16_to_f32(zr[k])));
  }
}

__device__ __forceinline__ double warp_sum_f64(double v) {
  v += __shfl_down_sync(0xFFFFFFFFu, v, 16);
  v += __shfl_down_sync(0xFFFFFFFFu, v, 8);
  v += __shfl_down_sync(0xFFFFFFFFu, v, 4);
  v += __shfl_down_sync(0xFFFFFFFFu, v, 2);
  v += __shfl_down_sync(0xFFFFFFFFu, v, 1);
  return __shfl_sync(0xFFFFFFFFu, v, 0);
}

// vision_cpu.cpp's layernorm_rows: moments in double, then fp32 (x r + (-r mean)) w + b. Rows strided.
__global__ void layernorm_kernel(const uint16_t* x, int64_t ldx, int64_t rows, int D, const float* __restrict__ w,
                                 const float* __restrict__ b, float eps, uint16_t* out, int64_t ldo) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const uint16_t* xr = x + row * ldx;
  uint16_t* o = out + row * ldo;
  double s = 0.0;
  for (int k = lane; k < D; k += 32) s += static_cast<double>(bf16_to_f32(xr[k]));
  const double mean_d = warp_sum_f64(s) / static_cast<double>(D);
  double ss = 0.0;
  for (int k = lane; k < D; k += 32) {
    const double d = static_cast<double>(bf16_to_f32(xr[k])) - mean_d;
    ss += d * d;
  }
  ss = warp_sum_f64(ss);
  const float mean = static_cast<float>(mean_d);
  const float var = static_cast<float>(ss / static_cast<double>(D));
  const float rstd = 1.0f / sqrtf((var < 0.0f ? 0.0f : var) + eps);  // std::max(var, 0.0f): NaN stays NaN
  const float shift = -rstd * mean;
  for (int k = lane; k < D; k += 32) o[k] = f32_to_bf16((bf16_to_f32(xr[k]) * rstd + shift) * w[k] + b[k]);
}

bool all_aligned16(std::initializer_list<const void*> ps) {
  for (const void* p : ps)
    if ((reinterpret_cast<uintptr_t>(p) & 15u) != 0) return false;
  return true;
}

int checked_width(int64_t D, const char* op) {
  if (D < 0 || D > (int64_t{1} << 30)) throw std::invalid_argument(std::string(op) + ": row width out of range");
  return static_cast<int>(D);
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

}  // namespace

void rmsnorm(CudaContext& ctx, const TensorView& x, const TensorView& w, float eps, NormKind kind, const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, -1}, "rmsnorm x");
  expect_view(w, DType::kF32, {x.dim(1)}, "rmsnorm weight");
  expect_view(out, DType::kBF16, {x.dim(0), x.dim(1)}, "rmsnorm out");
  if (!x.is_contiguous() || !out.is_contiguous()) throw std::invalid_argument("rmsnorm: rows must be contiguous");
  if (kind != NormKind::kOnePlus) throw std::invalid_argument("rmsnorm: unknown norm kind");
  const int64_t rows = x.dim(0);
  const int D = checked_width(x.dim(1), "rmsnorm");
  if (rows == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned16({x.data, w.data, out.data});
  launch_kernel(ctx, "rmsnorm", rmsnorm_kernel, row_blocks(rows), kThreads, 0, x.as<const uint16_t>(),
                w.as<const float>(), rows, D, eps, out.as<uint16_t>(), vec);
  check_launch("rmsnorm", x, w, out);
}

void rmsnorm_gated(CudaContext& ctx, const TensorView& x, const TensorView& z, const TensorView& w, float eps,
                   const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, -1}, "rmsnorm_gated x");
  expect_view(z, DType::kBF16, {x.dim(0), x.dim(1)}, "rmsnorm_gated z");
  expect_view(w, DType::kF32, {x.dim(1)}, "rmsnorm_gated weight");
  expect_view(out, DType::kBF16, {x.dim(0), x.dim(1)}, "rmsnorm_gated out");
  if (!x.is_contiguous() || !z.is_contiguous() || !out.is_contiguous())
    throw std::invalid_argument("rmsnorm_gated: the CUDA backend takes contiguous views only");
  const int64_t rows = x.dim(0);
  const int D = checked_width(x.dim(1), "rmsnorm_gated");
  if (rows == 0 || D == 0) return;
  const bool vec = D % 8 == 0 && all_aligned16({x.data, z.data, w.data, out.data});
  launch_kernel(ctx, "rmsnorm_gated", rmsnorm_gated_kernel, row_blocks(rows), kThreads, 0, x.as<const uint16_t>(),
                z.as<const uint16_t>(), w.as<const float>(), rows, D, eps, out.as<uint16_t>(), vec);
  check_launch("rmsnorm_gated", x, z, w, out);
}

void layernorm(CudaContext& ctx, const TensorView& x, const TensorView& w, const TensorView& b, float eps,
               const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, -1}, "layernorm x");
  const int64_t rows = x.dim(0);
  expect_view(w, DType::kF32, {x.dim(1)}, "layernorm weight");
  expect_view(b, DType::kF32, {x.dim(1)}, "layernorm bias");
  expect_view(out, DType::kBF16, {rows, x.dim(1)}, "layernorm out");
  const int D = checked_width(x.dim(1), "layernorm");
  if (rows == 0 || D == 0) return;
  launch_kernel(ctx, "layernorm", layernorm_kernel, row_blocks(rows), kThreads, 0, x.as<const uint16_t>(), x.stride[0],
                rows, D, w.as<const float>(), b.as<const float>(), eps, out.as<uint16_t>(), out.stride[0]);
  check_launch("layernorm", x, w, b, out);
}

}  // namespace fp4serve::kernels::cuda
