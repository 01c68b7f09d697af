// The MoE block's routing kernels: router softmax/top-k (one warp per token), the counting sort of
// (token, slot) pairs by expert (count, scan, place; or, for a decode-sized step, routing and sort
// in one block), and the gather of x rows into the grouped order. The arithmetic is in moe_route.h /
// moe_sort.h (host-tested); these kernels only distribute it over threads.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/cuda_limits.h"
#include "kernels/cuda/graph_launch.cuh"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/moe_plan.h"
#include "kernels/cuda/moe_route.h"
#include "kernels/cuda/moe_sort.h"

namespace fp4serve::kernels::cuda {
namespace {

constexpr unsigned kFull = 0xFFFFFFFFu;
constexpr int kRouteThreads = kMoeRouteWarps * kWarpSize;
static_assert(kMoeRouteWarps * moe::kMaxExperts * sizeof(float) <= kMaxSmemDefault,
              "the route kernel's probabilities fit the default shared memory (no opt-in needed)");

// One token's routing by one whole warp (converged): its E probabilities in p (shared memory), each
// lane owning experts lane, lane + 32, ... (moe_route.h); the k ids and weights to my_idx / my_w.
__device__ void route_token(const float* __restrict__ logits, int E, int k, int lane, float* p, int32_t* my_idx,
                            float* my_w) {
  float mx = moe::lane_load_max(logits, p, E, lane, kWarpSize);
  for (int off = kWarpSize / 2; off > 0; off >>= 1) mx = moe::max_of(mx, __shfl_xor_sync(kFull, mx, off));
  moe::lane_exp(p, E, lane, kWarpSize, mx);
  __syncwarp();  // every lane's p visible to lane 0
  float sum = lane == 0 ? moe::serial_sum(p, E) : 0.0f;
  sum = __shfl_sync(kFull, sum, 0);
  __syncwarp();  // lane 0 done reading before the lanes rescale their p
  moe::lane_scale(p, E, lane, kWarpSize, sum);
  for (int j = 0; j < k; ++j) {
    moe::Cand c = moe::lane_best(p, E, lane, kWarpSize);
    for (int off = kWarpSize / 2; off > 0; off >>= 1) {
      const moe::Cand other{__shfl_xor_sync(kFull, c.p, off), __shfl_xor_sync(kFull, c.e, off)};
      c = moe::first_of(c, other);
    }
    // Every lane holds the winner; its owner marks it taken (lanes only ever touch their own p).
    if (c.e % kWarpSize == lane) p[c.e] = -INFINITY;
    if (lane == 0) {
      my_idx[j] = c.e;
      my_w[j] = c.p;
    }
  }
  if (lane == 0) moe::renormalize(my_w, k);  // reads back what this lane wrote
  __syncwarp();  // p is free for the warp's next token
}

// Warp w of the block routes token blockIdx.x * kMoeRouteWarps + w. The whole warp leaves together
// for a token past T, and the kernel has no __syncthreads, so that exit is safe.
__global__ void __launch_bounds__(kRouteThreads) moe_route_kernel(const float* __restrict__ logits, int64_t T, int E,
                                                                  int k, int32_t* __restrict__ idx,
                                                                  float* __restrict__ weight) {
  extern __shared__ float s_prob[];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize, lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kMoeRouteWarps + warp;
  if (t >= T) return;
  route_token(logits + t * E, E, k, lane, s_prob + warp * E, idx + t * k, weight + t * k);
}

// A step of at most kSortChunk pairs (decode) in one block and one launch instead of four: its warps
// route the tokens, then the block sorts the pairs as the count/scan/place kernels do for a single
// chunk (hist's one row is then the offsets themselves), with the same moe_sort.h steps.
constexpr int kSmallWarps = moe::kSortChunk / kWarpSize;
constexpr std::size_t small_smem_bytes(int E) {
  return (static_cast<std::size_t>(kSmallWarps) * E + moe::kSortChunk + 2 * static_cast<std::size_t>(E) + 1) * 4;
}
static_assert(small_smem_bytes(moe::kMaxExperts) <= kMaxSmemDefault, "no shared memory opt-in needed");

__global__ void __launch_bounds__(moe::kSortChunk) moe_route_sort_small_kernel(const float* __restrict__ logits,
                                                                               int64_t T, int E, int k, int32_t* idx,
                                                                               float* weight, int32_t* offsets,
                                                                               int32_t* row_token, int32_t* row_of) {
  extern __shared__ float s_mem[];
  float* s_prob = s_mem;                                                  // [kSmallWarps, E]
  int32_t* ids = reinterpret_cast<int32_t*>(s_mem + kSmallWarps * E);  // [kSortChunk]
  int32_t* s_total = ids + moe::kSortChunk;                               // [E]
  int32_t* s_offset = s_total + E;                                        // [E + 1]
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarpSize, lane = tid % kWarpSize;
  for (int64_t t = warp; t < T; t += kSmallWarps)  // warp-uniform
    route_token(logits + t * E, E, k, lane, s_prob + warp * E, idx + t * k, weight + t * k);
  __syncthreads();  // the lanes 0's idx writes visible to the block
  const int n = static_cast<int>(T * k);
  if (tid < n) ids[tid] = idx[tid];
  __syncthreads();
  for (int e = tid; e < E; e += static_cast<int>(blockDim.x)) s_total[e] = moe::count_expert(ids, n, e);
  __syncthreads();
  if (tid == 0) moe::exclusive_offsets(s_total, E, s_offset);
  __syncthreads();
  for (int e = tid; e <= E; e += static_cast<int>(blockDim.x)) offsets[e] = s_offset[e];
  if (tid < n) {
    const int32_t row = moe::grouped_row(ids, tid, s_offset);
    row_token[row] = tid / k;
    row_of[tid] = row;
  }
}

// The chunk's expert ids into shared memory; returns how many pairs the chunk has.
__device__ int load_chunk(const int32_t* __restrict__ idx, int64_t pairs, int32_t* ids) {
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * moe::kSortChunk;
  const int n = static_cast<int>(min(static_cast<int64_t>(moe::kSortChunk), pairs - i0));
  if (static_cast<int>(threadIdx.x) < n) ids[threadIdx.x] = idx[i0 + threadIdx.x];
  return n;
}

__global__ void __launch_bounds__(moe::kSortChunk) moe_count_kernel(const int32_t* __restrict__ idx, int64_t pairs,
                                                                    int E, int32_t* __restrict__ hist) {
  __shared__ int32_t ids[moe::kSortChunk];
  const int n = load_chunk(idx, pairs, ids);
  __syncthreads();
  int32_t* row = hist + static_cast<int64_t>(blockIdx.x) * E;
  for (int e = static_cast<int>(threadIdx.x); e < E; e += static_cast<int>(blockDim.x)) row[e] = moe::count_expert(ids, n, e);
}

// One block: the expert columns are independent (one thread each), the offsets a serial scan.
__global__ void __launch_bounds__(moe::kSortChunk) moe_scan_kernel(int32_t* __restrict__ hist, int chunks, int E,
                                                                   int32_t* __restrict__ offsets) {
  __shared__ int32_t s_total[moe::kMaxExperts];
  __shared__ int32_t s_offset[moe::kMaxExperts + 1];
  for (int e = static_cast<int>(threadIdx.x); e < E; e += static_cast<int>(blockDim.x))
    s_total[e] = moe::column_exclusive(hist, chunks, E, e);
  __syncthreads();
  if (threadIdx.x == 0) moe::exclusive_offsets(s_total, E, s_offset);
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < E; e += static_cast<int>(blockDim.x))
    moe::column_add(hist, chunks, E, e, s_offset[e]);
  for (int e = static_cast<int>(threadIdx.x); e <= E; e += static_cast<int>(blockDim.x)) offsets[e] = s_offset[e];
}

__global__ void __launch_bounds__(moe::kSortChunk) moe_place_kernel(const int32_t* __restrict__ idx, int64_t pairs,
                                                                    int E, int k, const int32_t* __restrict__ hist,
                                                                    int32_t* __restrict__ row_token,
                                                                    int32_t* __restrict__ row_of) {
  __shared__ int32_t ids[moe::kSortChunk];
  const int n = load_chunk(idx, pairs, ids);
  __syncthreads();
  const int i = static_cast<int>(threadIdx.x);
  if (i >= n) return;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * moe::kSortChunk + i;
  const int32_t row = moe::grouped_row(ids, i, hist + static_cast<int64_t>(blockIdx.x) * E);
  row_token[row] = static_cast<int32_t>(pair / k);
  row_of[pair] = row;
}

// Block r copies x[row_token[r]] to out[r], `width` elements of V per row.
template <class V>
__global__ void __launch_bounds__(256) moe_gather_kernel(const V* __restrict__ x, int64_t width,
                                                         const int32_t* __restrict__ row_token, V* __restrict__ out) {
  const int64_t r = blockIdx.x;
  const V* src = x + static_cast<int64_t>(row_token[r]) * width;
  V* dst = out + r * width;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) dst[j] = src[j];
}

}  // namespace

void launch_moe_route(const LaunchTarget& stream, const float* logits, int64_t T, int E, int k, int32_t* idx,
                      float* weight) {
  const std::size_t smem = static_cast<std::size_t>(kMoeRouteWarps) * static_cast<std::size_t>(E) * sizeof(float);
  launch_kernel(stream, "moe_route_kernel", moe_route_kernel, static_cast<unsigned>(moe_route_blocks(T)), kRouteThreads,
                smem, logits, T, E, k, idx, weight);
}

bool moe_route_sort_fused(int64_t pairs) { return pairs <= moe::kSortChunk; }

void launch_moe_route_sort(const LaunchTarget& stream, const float* logits, int64_t T, int E, int k, int32_t* idx,
                           float* weight, int32_t* hist, int32_t* offsets, int32_t* row_token, int32_t* row_of) {
  if (moe_route_sort_fused(T * k)) {
    launch_kernel(stream, "moe_route_sort_small_kernel", moe_route_sort_small_kernel, 1, moe::kSortChunk,
                  small_smem_bytes(E), logits, T, E, k, idx, weight, offsets, row_token, row_of);
    return;
  }
  launch_moe_route(stream, logits, T, E, k, idx, weight);
  launch_moe_sort(stream, idx, T * k, E, k, hist, offsets, row_token, row_of);
}

void launch_moe_sort(const LaunchTarget& stream, const int32_t* idx, int64_t pairs, int E, int k, int32_t* hist,
                     int32_t* offsets, int32_t* row_token, int32_t* row_of) {
  const int64_t chunks = (pairs + moe::kSortChunk - 1) / moe::kSortChunk;
  launch_kernel(stream, "moe_count_kernel", moe_count_kernel, static_cast<unsigned>(chunks), moe::kSortChunk, 0, idx,
                pairs, E, hist);
  launch_kernel(stream, "moe_scan_kernel", moe_scan_kernel, 1, moe::kSortChunk, 0, hist, static_cast<int>(chunks), E,
                offsets);
  launch_kernel(stream, "moe_place_kernel", moe_place_kernel, static_cast<unsigned>(chunks), moe::kSortChunk, 0, idx,
                pairs, E, k, hist, row_token, row_of);
}

void launch_moe_gather(const LaunchTarget& stream, const uint16_t* x, int64_t H, const int32_t* row_token, int64_t rows,
                       uint16_t* out) {
  const bool wide = H % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  if (wide) {
    launch_kernel(stream, "moe_gather_kernel<uint4>", moe_gather_kernel<uint4>, static_cast<unsigned>(rows), 256, 0,
                  reinterpret_cast<const uint4*>(x), H / 8, row_token, reinterpret_cast<uint4*>(out));
  } else {
    launch_kernel(stream, "moe_gather_kernel<uint16_t>", moe_gather_kernel<uint16_t>, static_cast<unsigned>(rows), 256,
                  0, x, H, row_token, out);
  }
}

}  // namespace fp4serve::kernels::cuda
