// Element-wise and row-movement ops on CUDA (elementwise_cuda.h), twins of the CPU backend's
// (cpu_backend.cpp, vision_cpu.cpp) with the same bits: data movement is exact, the conversions and
// the residual add are one IEEE operation and the CPU's bf16 rounding each, and bias_activation's
// GELUs are elementwise_math.h's (checked against the CPU formulas on every bf16 input).
// Contiguous arrays move 16 bytes per thread where the pointers allow it (a scalar tail otherwise);
// rows are one warp each. GDN state copy/zero: elementwise_state.cu.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/elementwise_cuda.h"
#include "kernels/cuda/elementwise_device.cuh"
#include "kernels/cuda/elementwise_math.h"
#include "kernels/cuda/graph_launch.cuh"

namespace fp4serve::kernels::cuda {
namespace {

using namespace elem;  // elementwise_device.cuh, elementwise_math.h, rope_math.h

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;  // one warp per row

__device__ __forceinline__ int64_t global_thread() { return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; }
__device__ __forceinline__ int64_t grid_threads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---- embedding and row gather: one warp per output row ----------------------------------------

// Ids were checked on the host before the launch; a bad one that got here anyway (a launch inside
// graph capture skips that check) gives a zero row instead of a read outside the table.
__global__ void embedding_kernel(const uint16_t* __restrict__ table, int64_t V, int64_t H,
                                 const int32_t* __restrict__ ids, int64_t T, uint16_t* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (t >= T) return;
  const int64_t id = ids[t];
  if (id < 0 || id >= V)
    warp_zero_row_bf16(out + t * H, H, lane);
  else
    warp_copy_row_bf16(out + t * H, table + id * H, H, lane);
}

__global__ void gather_rows_kernel(const uint16_t* __restrict__ x, int64_t ldx, const int64_t* __restrict__ rows,
                                   int64_t n, int64_t H, uint16_t* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (i >= n) return;
  warp_copy_row_bf16(out + i * H, x + rows[i] * ldx, H, lane);
}

// ---- flat element-wise: vectors of 8 (bf16) or 4 (f32) elements, then a scalar tail --------------

__global__ void to_bf16_kernel(const float* __restrict__ x, uint16_t* __restrict__ out, int64_t n, int64_t n8) {
  const int64_t stride = grid_threads();
  for (int64_t v = global_thread(); v < n8; v += stride) {
    const float4 a = reinterpret_cast<const float4*>(x)[2 * v], b = reinterpret_cast<const float4*>(x)[2 * v + 1];
    reinterpret_cast<uint4*>(out)[v] =
        make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(b.x, b.y), pack_bf16(b.z, b.w));
  }
  for (int64_t i = n8 * 8 + global_thread(); i < n; i += stride) out[i] = f32_to_bf16(x[i]);
}

__global__ void round_bf16_kernel(float* x, int64_t n, int64_t n4) {
  const int64_t stride = grid_threads();
  for (int64_t v = global_thread(); v < n4; v += stride) {
    float4 a = reinterpret_cast<float4*>(x)[v];
    a.x = round_bf16(a.x), a.y = round_bf16(a.y), a.z = round_bf16(a.z), a.w = round_bf16(a.w);
    reinterpret_cast<float4*>(x)[v] = a;
  }
  for (int64_t i = n4 * 4 + global_thread(); i < n; i += stride) x[i] = round_bf16(x[i]);
}

__device__ __forceinline__ uint32_t add_pair(uint32_t a, uint32_t b) {
  return pack_bf16(lo_bf16(a) + lo_bf16(b), hi_bf16(a) + hi_bf16(b));
}

// x = bf16(x + y). x and y may be the same array (each element is read and written by one thread).
__global__ void residual_add_kernel(uint16_t* x, const uint16_t* y, int64_t n, int64_t n8) {
  const int64_t stride = grid_threads();
  for (int64_t v = global_thread(); v < n8; v += stride) {
    const uint4 a = reinterpret_cast<const uint4*>(x)[v], b = reinterpret_cast<const uint4*>(y)[v];
    reinterpret_cast<uint4*>(x)[v] = make_uint4(add_pair(a.x, b.x), add_pair(a.y, b.y), add_pair(a.z, b.z), add_pair(a.w, b.w));
  }
  for (int64_t i = n8 * 8 + global_thread(); i < n; i += stride) x[i] = f32_to_bf16(bf16_to_f32(x[i]) + bf16_to_f32(y[i]));
}

// ---- bias + activation over row-strided [R, N] ------------------------------------------------

__device__ __forceinline__ float bias_act(float x, float bias, bool has_bias, Activation act) {
  const float y = round_bf16(has_bias ? x + bias : x);
  if (act == Activation::kGeluTanh) return gelu_tanh_f32(y);
  if (act == Activation::kGeluErf) return gelu_erf_f32(y);
  return y;
}

// Each thread takes four consecutive columns of a row: one float4 of x (and of the bias) and one
// 8-byte store when `vec` (N, both row strides and the pointers allow it), four scalars otherwise.
__global__ void bias_activation_kernel(const float* __restrict__ x, int64_t ldx, const float* __restrict__ bias,
                                       int64_t rows, int64_t N, Activation act, uint16_t* __restrict__ out,
                                       int64_t ldo, bool vec) {
  const int64_t quads = (N + 3) / 4, total = rows * quads;
  const bool has_bias = bias != nullptr;
  for (int64_t q = global_thread(); q < total; q += grid_threads()) {
    const int64_t r = q / quads, c = (q - r * quads) * 4;
    const float* xr = x + r * ldx;
    uint16_t* o = out + r * ldo;
    if (vec) {
      const float4 a = *reinterpret_cast<const float4*>(xr + c);
      const float4 b = has_bias ? *reinterpret_cast<const float4*>(bias + c) : make_float4(0.f, 0.f, 0.f, 0.f);
      *reinterpret_cast<uint2*>(o + c) =
          make_uint2(pack_bf16(bias_act(a.x, b.x, has_bias, act), bias_act(a.y, b.y, has_bias, act)),
                     pack_bf16(bias_act(a.z, b.z, has_bias, act), bias_act(a.w, b.w, has_bias, act)));
    } else {
      for (int64_t k = c; k < c + 4 && k < N; ++k)
        o[k] = f32_to_bf16(bias_act(xr[k], has_bias ? bias[k] : 0.0f, has_bias, act));
    }
  }
}

bool aligned(const void* p, std::size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

void expect_contiguous(std::initializer_list<const TensorView*> views, const char* op) {
  for (const TensorView* v : views)
    if (!v->is_contiguous()) throw std::invalid_argument(std::string(op) + ": the CUDA backend takes contiguous views only");
}

}  // namespace

void embedding(CudaContext& ctx, const TensorView& table, const TensorView& ids, const TensorView& out) {
  expect_view(table, DType::kBF16, {-1, -1}, "embedding table");
  expect_view(ids, DType::kI32, {-1}, "embedding ids");
  expect_view(out, DType::kBF16, {ids.dim(0), table.dim(1)}, "embedding out");
  expect_contiguous({&table, &out}, "embedding");
  const int64_t V = table.dim(0), H = table.dim(1), T = ids.dim(0);
  if (T == 0) return;
  // An id outside the table is the CPU op's error, raised here and naming the token, from the host
  // copy of the ids Backend::upload kept (CudaContext::last_ids): no read back of the device (a wait,
  // and illegal inside a step graph's capture). Ids that did not come through upload (none in the
  // model) are not checked here; the kernel's guard writes a zero row for them.
  if (ids.data == ctx.last_ids_device && static_cast<std::size_t>(T) <= ctx.last_ids.size()) {
    for (int64_t t = 0; t < T; ++t) {
      const int32_t id = ctx.last_ids[static_cast<std::size_t>(t)];
      if (id < 0 || id >= V)
        throw std::out_of_range("embedding_lookup: token id " + std::to_string(id) + " at position " +
                                std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    }
  }
  launch_kernel(ctx, "embedding", embedding_kernel, row_blocks(T), kThreads, 0, table.as<const uint16_t>(), V, H,
                ids.as<const int32_t>(), T, out.as<uint16_t>());
  check_launch("embedding", table, ids, out);
}

void to_bf16(CudaContext& ctx, const TensorView& x, const TensorView& out) {
  if (x.dtype != DType::kF32 || out.dtype != DType::kBF16 || x.numel() != out.numel() || !x.is_contiguous() ||
      !out.is_contiguous())
    throw std::invalid_argument("to_bf16: expected contiguous f32 in and bf16 out of the same size");
  const int64_t n = x.numel();
  if (n == 0) return;
  const int64_t n8 = aligned(x.data, 16) && aligned(out.data, 16) ? n / 8 : 0;
  launch_kernel(ctx, "to_bf16", to_bf16_kernel, grid_for(ctx, n8 > 0 ? n8 : n, kThreads), kThreads, 0,
                x.as<const float>(), out.as<uint16_t>(), n, n8);
  check_launch("to_bf16", x, out);
}

void round_bf16(CudaContext& ctx, const TensorView& x) {
  if (x.dtype != DType::kF32 || !x.is_contiguous()) throw std::invalid_argument("round_bf16: expected contiguous f32");
  const int64_t n = x.numel();
  if (n == 0) return;
  const int64_t n4 = aligned(x.data, 16) ? n / 4 : 0;
  launch_kernel(ctx, "round_bf16", round_bf16_kernel, grid_for(ctx, n4 > 0 ? n4 : n, kThreads), kThreads, 0,
                x.as<float>(), n, n4);
  check_launch("round_bf16", x);
}

void residual_add(CudaContext& ctx, const TensorView& x, const TensorView& y) {
  expect_view(x, DType::kBF16, {-1, -1}, "residual x");
  expect_view(y, DType::kBF16, {x.dim(0), x.dim(1)}, "residual y");
  expect_contiguous({&x, &y}, "residual_add");
  const int64_t n = x.numel();
  if (n == 0) return;
  const int64_t n8 = aligned(x.data, 16) && aligned(y.data, 16) ? n / 8 : 0;
  launch_kernel(ctx, "residual_add", residual_add_kernel, grid_for(ctx, n8 > 0 ? n8 : n, kThreads), kThreads, 0,
                x.as<uint16_t>(), y.as<const uint16_t>(), n, n8);
  check_launch("residual_add", x, y);
}

void bias_activation(CudaContext& ctx, const TensorView& x, const TensorView& bias, Activation act, const TensorView& out) {
  expect_view(x, DType::kF32, {-1, -1}, "bias_activation x");
  const int64_t R = x.dim(0), N = x.dim(1);
  if (bias.data != nullptr) expect_view(bias, DType::kF32, {N}, "bias_activation bias");
  expect_view(out, DType::kBF16, {R, N}, "bias_activation out");
  if (act != Activation::kNone && act != Activation::kGeluTanh && act != Activation::kGeluErf)
    throw std::invalid_argument("bias_activation: unknown activation");
  const int64_t quads = (N + 3) / 4;
  if (R == 0 || N == 0) return;
  const bool vec = N % 4 == 0 && (R == 1 || (x.stride[0] % 4 == 0 && out.stride[0] % 4 == 0)) && aligned(x.data, 16) &&
                   aligned(out.data, 8) && (bias.data == nullptr || aligned(bias.data, 16));
  const float* b = bias.data ? bias.as<const float>() : nullptr;
  launch_kernel(ctx, "bias_activation", bias_activation_kernel, grid_for(ctx, R * quads, kThreads), kThreads, 0,
                x.as<const float>(), x.stride[0], b, R, N, act, out.as<uint16_t>(), out.stride[0], vec);
  check_launch("bias_activation", x, out);
}

void gather_rows(CudaContext& ctx, const TensorView& x, std::span<const int64_t> rows, const TensorView& out) {
  expect_view(x, DType::kBF16, {-1, -1}, "gather_rows x");
  const int64_t H = x.dim(1);
  expect_view(out, DType::kBF16, {static_cast<int64_t>(rows.size()), H}, "gather_rows out");
  expect_contiguous({&out}, "gather_rows");
  for (int64_t r : rows)
    if (r < 0 || r >= x.dim(0)) throw std::out_of_range("gather_rows: row outside the step");
  if (rows.empty() || H == 0) return;
  const int64_t* d_rows = ctx.upload(rows, "gather_rows rows");
  const auto n = static_cast<int64_t>(rows.size());
  launch_kernel(ctx, "gather_rows", gather_rows_kernel, row_blocks(n), kThreads, 0, x.as<const uint16_t>(), x.stride[0],
                d_rows, n, H, out.as<uint16_t>());
  check_launch("gather_rows", x, out);
}

}  // namespace fp4serve::kernels::cuda
