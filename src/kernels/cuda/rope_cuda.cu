// Rotary embeddings on CUDA (rope_cuda.h): the text model's partial interleaved M-RoPE (rope.h) and
// the vision tower's rotation by per-row tables (vision.h).
//
// rope: one block per token. Its threads first compute the token's cos/sin (rotary_dim / 2 values,
// shared memory) exactly as the CPU's rope_cos_sin does: inv_freq from the host in the CPU's own
// expression, the angle pos * inv_freq in fp32, sin/cos by rope_math.h (correctly rounded to fp32;
// checked against glibc's on the CPU), rounded to bf16. Then every (head, i < rot/2) pair rotates
// x[i] and x[i + rot/2] with the CPU's roundings: x'[i] = bf16(bf16(x[i] cos) + bf16(rot_half[i] sin)).
// Dimensions from rotary_dim on are not touched.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/elementwise_device.cuh"
#include "kernels/cuda/graph_launch.cuh"
#include "kernels/cuda/rope_cuda.h"
#include "kernels/cuda/rope_math.h"

namespace fp4serve::kernels::cuda {
namespace {

using namespace elem;  // elementwise_device.cuh, elementwise_math.h, rope_math.h

constexpr int kRopeThreads = 128;

// By value: the frequency table travels in the launch's parameters (no upload, capturable).
struct RopeArgs {
  int heads = 0, head_dim = 0, half = 0, sec_h = 0, sec_w = 0;
  float inv_freq[kMaxRopeHalf];
};

__global__ void rope_kernel(uint16_t* x, const int64_t* __restrict__ pos_t, const int64_t* __restrict__ pos_h,
                            const int64_t* __restrict__ pos_w, const RopeArgs a) {
  __shared__ float cos_s[kMaxRopeHalf], sin_s[kMaxRopeHalf];
  const int64_t t = blockIdx.x;
  for (int i = threadIdx.x; i < a.half; i += blockDim.x) {
    const int axis = rope_axis(i, a.sec_h, a.sec_w);
    const int64_t p = axis == 0 ? pos_t[t] : axis == 1 ? pos_h[t] : pos_w[t];
    float s, c;
    sincos_f32(static_cast<float>(p) * a.inv_freq[i], &s, &c);
    cos_s[i] = round_bf16(c);
    sin_s[i] = round_bf16(s);
  }
  __syncthreads();
  uint16_t* row = x + t * a.heads * a.head_dim;
  const int pairs = a.heads * a.half;
  for (int j = threadIdx.x; j < pairs; j += blockDim.x) {
    const int h = j / a.half, i = j - h * a.half;
    uint16_t* v = row + static_cast<int64_t>(h) * a.head_dim;
    const float x0 = bf16_to_f32(v[i]), x1 = bf16_to_f32(v[i + a.half]);
    const float c = cos_s[i], s = sin_s[i];
    // rot_half: -x1 at i, x0 at i + half (cos and sin repeat with period half).
    v[i] = f32_to_bf16(round_bf16(x0 * c) + round_bf16(-x1 * s));
    v[i + a.half] = f32_to_bf16(round_bf16(x1 * c) + round_bf16(x0 * s));
  }
}

// vision_cpu.cpp's rope_table_rows: out[i] = bf16(x[i] cos[i] + rot_half(x)[i] sin[i]), one rounding.
// One thread per (token, head, i < D/2) pair; token rows strided (heads contiguous within a token).
__global__ void rope_table_kernel(uint16_t* x, int64_t ldx, int64_t T, int H, int D, const float* __restrict__ cos,
                                  const float* __restrict__ sin) {
  const int half = D / 2;
  const int64_t pairs = T * H * half;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < pairs;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(j % half);
    const int64_t th = j / half;
    const int h = static_cast<int>(th % H);
    const int64_t t = th / H;
    uint16_t* v = x + t * ldx + static_cast<int64_t>(h) * D;
    const float* c = cos + t * D;
    const float* s = sin + t * D;
    const float x0 = bf16_to_f32(v[i]), x1 = bf16_to_f32(v[i + half]);
    const float a0 = x0 * c[i], b0 = -x1 * s[i];
    const float a1 = x1 * c[i + half], b1 = x0 * s[i + half];
    v[i] = f32_to_bf16(a0 + b0);
    v[i + half] = f32_to_bf16(a1 + b1);
  }
}

}  // namespace

void rope(CudaContext& ctx, const TensorView& x, const TensorView& positions, const RopeConfig& cfg) {
  expect_view(x, DType::kBF16, {-1, -1, cfg.head_dim}, "rope x");
  if (!x.is_contiguous()) throw std::invalid_argument("rope: the CUDA backend takes contiguous views only");
  const int64_t T = x.dim(0);
  const int64_t* pt = nullptr;
  const int64_t* ph = nullptr;
  const int64_t* pw = nullptr;
  if (positions.rank == 2) {
    expect_view(positions, DType::kI64, {3, T}, "rope positions");
    if (!positions.is_contiguous()) throw std::invalid_argument("rope: the CUDA backend takes contiguous views only");
    pt = positions.as<const int64_t>(), ph = pt + T, pw = pt + 2 * T;
  } else {
    expect_view(positions, DType::kI64, {T}, "rope positions");
    pt = ph = pw = positions.as<const int64_t>();
  }
  if (cfg.rotary_dim <= 0 || cfg.rotary_dim % 2 != 0 || cfg.rotary_dim > cfg.head_dim)
    throw std::invalid_argument("apply_rope: rotary_dim must be even and within head_dim");
  if (cfg.rotary_dim / 2 > kMaxRopeHalf)
    throw std::invalid_argument("rope: rotary_dim above " + std::to_string(2 * kMaxRopeHalf) + " (CUDA backend)");
  if (x.dim(1) > (int64_t{1} << 20)) throw std::invalid_argument("rope: too many heads");
  if (T == 0 || x.dim(1) == 0) return;
  RopeArgs a{};
  a.heads = static_cast<int>(x.dim(1));
  a.head_dim = cfg.head_dim;
  a.half = cfg.rotary_dim / 2;
  a.sec_h = cfg.sections[1];
  a.sec_w = cfg.sections[2];
  rope_inv_freq(cfg, a.inv_freq);
  launch_kernel(ctx, "rope", rope_kernel, static_cast<unsigned>(T), kRopeThreads, 0, x.as<uint16_t>(), pt, ph, pw, a);
  check_launch("rope", x, positions);
}

void rope_table(CudaContext& ctx, const TensorView& x, const TensorView& cos, const TensorView& sin) {
  expect_view(x, DType::kBF16, {-1, -1, -1}, "rope_table x");
  const int64_t T = x.dim(0), H = x.dim(1), D = x.dim(2);
  if (x.stride[1] != D || x.stride[0] < H * D)
    throw std::invalid_argument("rope_table x: heads must be contiguous within a token row");
  if (D % 2 != 0 || D > 1024) throw std::invalid_argument("rope_table: head dim must be even and at most 1024");
  expect_view(cos, DType::kF32, {T, D}, "rope_table cos");
  expect_view(sin, DType::kF32, {T, D}, "rope_table sin");
  if (!cos.is_contiguous() || !sin.is_contiguous()) throw std::invalid_argument("rope_table: cos/sin must be contiguous");
  if (H > (int64_t{1} << 20)) throw std::invalid_argument("rope_table: too many heads");
  const int64_t pairs = T * H * (D / 2);
  if (pairs == 0) return;
  launch_kernel(ctx, "rope_table", rope_table_kernel, grid_for(ctx, pairs, 256), 256, 0, x.as<uint16_t>(), x.stride[0],
                T, static_cast<int>(H), static_cast<int>(D), cos.as<const float>(), sin.as<const float>());
  check_launch("rope_table", x, cos, sin);
}

}  // namespace fp4serve::kernels::cuda
