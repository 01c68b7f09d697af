// The MoE block's element-wise kernels around the expert linears: SwiGLU (routed and shared) and the
// per-token combine (routed terms in ascending expert id with bf16 adds, then the gated shared
// expert). The arithmetic is moe_math.h's (host-tested against moe_cpu.cpp).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/graph_launch.cuh"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/moe_math.h"
#include "kernels/cuda/moe_route.h"

namespace fp4serve::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Elements [0, a.n) of job a, then [a.n, a.n + b.n) of job b, over a grid-stride loop.
__global__ void __launch_bounds__(kThreads) moe_swiglu_kernel(SwigluJob a, SwigluJob b) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n + b.n; i += step) {
    const SwigluJob& j = i < a.n ? a : b;
    const int64_t at = i < a.n ? i : i - a.n;
    j.h[at] = moe::bf16_bits(moe::swiglu(j.g[at], j.u[at]));
  }
}

// Block t combines token t. Thread 0 orders the token's slots by expert id (shared, k entries);
// then each thread owns columns h = threadIdx.x, + blockDim.x, ... and adds the token's terms in
// that order, exactly moe_cpu.cpp's loop per column.
__global__ void __launch_bounds__(kThreads) moe_combine_kernel(const float* __restrict__ down,
                                                               const int32_t* __restrict__ idx,
                                                               const float* __restrict__ weight,
                                                               const int32_t* __restrict__ row_of, int k, int64_t H,
                                                               const float* __restrict__ s_score,
                                                               const float* __restrict__ s_down,
                                                               uint16_t* __restrict__ out) {
  extern __shared__ int32_t s_order[];
  const int64_t t = blockIdx.x;
  if (threadIdx.x == 0) moe::combine_order(idx + t * k, k, s_order);
  __syncthreads();
  const float gate = s_down != nullptr ? moe::shared_gate(s_score[t]) : 0.0f;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int64_t pair = t * k + s_order[j];
      acc = moe::add_routed(acc, down[static_cast<int64_t>(row_of[pair]) * H + h], weight[pair]);
    }
    if (s_down != nullptr) acc = moe::add_shared(acc, gate, s_down[t * H + h]);
    out[t * H + h] = moe::bf16_bits(acc);
  }
}

}  // namespace

void launch_moe_swiglu(const LaunchTarget& stream, const SwigluJob& a, const SwigluJob& b) {
  // A grid-stride loop: enough blocks to fill the device many times over, a fixed cap past that
  // (the element order does not matter: each element is independent).
  const int64_t n = a.n + b.n;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t{1} << 16);
  if (blocks > 0)
    launch_kernel(stream, "moe_swiglu_kernel", moe_swiglu_kernel, static_cast<unsigned>(blocks), kThreads, 0, a, b);
}

void launch_moe_combine(const LaunchTarget& stream, const float* down, const int32_t* idx, const float* weight,
                        const int32_t* row_of, int64_t T, int k, int64_t H, const float* s_score, const float* s_down,
                        uint16_t* out) {
  const std::size_t smem = static_cast<std::size_t>(k) * sizeof(int32_t);
  launch_kernel(stream, "moe_combine_kernel", moe_combine_kernel, static_cast<unsigned>(T), kThreads, smem, down, idx,
                weight, row_of, k, H, s_score, s_down, out);
}

}  // namespace fp4serve::kernels::cuda
