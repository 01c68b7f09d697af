// Block-wide building blocks of the sampling kernel (one block of kSampleThreads per row). Every
// function here is called by all threads of the block with the same arguments (row-uniform control
// flow only), synchronizes inside, and returns the same value to every thread. Reductions run in a
// fixed order (cub's trees; integer sums), so a row's result never depends on the other rows of
// the launch, and no floating-point value is ever accumulated with atomics.
#pragma once

#include <climits>
#include <cstdint>

// FP4SERVE_CUDA_EMULATION: compiled by the host compiler under the unit tests' block emulation
// (tests/unit/kernels/cuda_block_emulation.h provides the CUDA names and cub's block primitives).
#if !defined(FP4SERVE_CUDA_EMULATION)
#include <cuda_runtime.h>

#include <cub/cub.cuh>
#endif

#include "kernels/cuda/sampling_rules.h"

namespace fp4serve::kernels::cuda::sampling_block {

inline constexpr int kSampleThreads = 512;
// A top-k row whose kept set has at most this many tokens is finished in shared memory.
inline constexpr int kCompactCandidates = 512;
using u64 = unsigned long long;

struct ArgMax {
  float value;
  int index;
};
// Higher value first, lower index among equals (torch.argmax's first maximum); NaN never wins.
struct ArgMaxOp {
  __device__ ArgMax operator()(const ArgMax& a, const ArgMax& b) const {
    return (b.value > a.value || (b.value == a.value && b.index < a.index)) ? b : a;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

using ReduceF = cub::BlockReduce<float, kSampleThreads>;
using ReduceD = cub::BlockReduce<double, kSampleThreads>;
using ReduceU = cub::BlockReduce<u64, kSampleThreads>;
using ReduceA = cub::BlockReduce<ArgMax, kSampleThreads>;
using ScanU = cub::BlockScan<u64, kSampleThreads>;

struct Shared {
  union {
    typename ReduceF::TempStorage f;
    typename ReduceD::TempStorage d;
    typename ReduceU::TempStorage u;
    typename ReduceA::TempStorage a;
    typename ScanU::TempStorage scan;
  } temp;
  u64 hist[256];
  union {
    u64 bucket[sampling_rules::kNumBuckets];  // top-p alone
    struct {
      uint32_t key[kCompactCandidates];  // gathered unordered
      int id[kCompactCandidates];
      int sorted_id[kCompactCandidates];  // in rank order
      u64 mass[kCompactCandidates];
    } compact;  // top-k with a small kept set
  };
  int compact_count;
  float bcast_f;
  double bcast_d;
  u64 bcast_u;
  int bcast_i;
  int found;
  u64 found_before;
  int walk_begin, walk_end;  // the tile id_order_search walks
  u64 walk_before;
  int sel;
  u64 sel_above;
};

__device__ __forceinline__ float block_max(float v, Shared& sh) {
  const float r = ReduceF(sh.temp.f).Reduce(v, MaxOp());
  if (threadIdx.x == 0) sh.bcast_f = r;
  __syncthreads();
  const float out = sh.bcast_f;
  __syncthreads();
  return out;
}

__device__ __forceinline__ double block_sum(double v, Shared& sh) {
  const double r = ReduceD(sh.temp.d).Sum(v);
  if (threadIdx.x == 0) sh.bcast_d = r;
  __syncthreads();
  const double out = sh.bcast_d;
  __syncthreads();
  return out;
}

__device__ __forceinline__ u64 block_sum(u64 v, Shared& sh) {
  const u64 r = ReduceU(sh.temp.u).Sum(v);
  if (threadIdx.x == 0) sh.bcast_u = r;
  __syncthreads();
  const u64 out = sh.bcast_u;
  __syncthreads();
  return out;
}

// Calls f(i, value(i)) for every i of [0, n), the block's threads striding over it (thread t takes
// t, t + kSampleThreads, ... in that order), eight loads issued before the first is used: one block
// reads a whole row alone, so it needs many loads in flight to approach the memory's bandwidth.
template <class Value, class F>
__device__ __forceinline__ void for_each_value(int n, const Value& value, F&& f) {
  constexpr int kUnroll = 8;
  int i = static_cast<int>(threadIdx.x);
  for (; i + (kUnroll - 1) * kSampleThreads < n; i += kUnroll * kSampleThreads) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x[u] = value(i + u * kSampleThreads);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) f(i + u * kSampleThreads, x[u]);
  }
  for (; i < n; i += kSampleThreads) f(i, value(i));
}

// Index of the first maximum of value(i) over [0, n) (0 when there is none: every value NaN).
template <class Value>
__device__ int block_argmax_first(int n, Value value, Shared& sh) {
  ArgMax best{-INFINITY, INT_MAX};
  for_each_value(n, value, [&](int i, float x) {
    if (x > best.value || (x == best.value && i < best.index)) best = ArgMax{x, i};
  });
  const ArgMax r = ReduceA(sh.temp.a).Reduce(best, ArgMaxOp());
  if (threadIdx.x == 0) sh.bcast_i = r.index == INT_MAX ? 0 : r.index;
  __syncthreads();
  const int out = sh.bcast_i;
  __syncthreads();
  return out;
}

struct Found {
  int index;   // -1 when the masses sum to <= target
  u64 before;  // mass of [0, index)
};

// The first index i of [0, n) whose inclusive prefix sum of mass(i) exceeds `target`, walking in
// index order. Each thread owns one contiguous tile of the range: tile sums and one block scan
// find the tile that holds the crossing, then warp 0 walks that tile 32 indices at a time (a warp
// scan and a ballot per step).
template <class Mass>
__device__ Found id_order_search(int n, Mass mass, u64 target, Shared& sh) {
  const int per = (n + kSampleThreads - 1) / kSampleThreads;
  const int begin = min(n, static_cast<int>(threadIdx.x) * per);
  const int end = min(n, begin + per);
  u64 local = 0;
#pragma unroll 8  // a thread's tile is contiguous and its loads independent: keep several in flight
  for (int i = begin; i < end; ++i) local += mass(i);
  u64 before, total;
  ScanU(sh.temp.scan).ExclusiveSum(local, before, total);
  if (before <= target && target < before + local) {
    sh.walk_begin = begin;
    sh.walk_end = end;
    sh.walk_before = before;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    if (lane == 0) sh.found = -1;
    __syncwarp();
    if (target < total) {
      const int walk_end = sh.walk_end;
      u64 cum = sh.walk_before;
      for (int base = sh.walk_begin; base < walk_end; base += 32) {
        const int i = base + lane;
        const u64 m = i < walk_end ? mass(i) : 0ull;
        u64 inclusive = m;
#pragma unroll
        for (int offset = 1; offset < 32; offset <<= 1) {
          const u64 y = __shfl_up_sync(0xffffffffu, inclusive, offset);
          if (lane >= offset) inclusive += y;
        }
        const unsigned hit = __ballot_sync(0xffffffffu, cum + inclusive > target);
        if (hit != 0) {
          if (lane == __ffs(static_cast<int>(hit)) - 1) {
            sh.found = i;
            sh.found_before = cum + inclusive - m;
          }
          break;
        }
        cum += __shfl_sync(0xffffffffu, inclusive, 31);
      }
    }
  }
  __syncthreads();
  const Found out{sh.found, sh.found < 0 ? 0ull : sh.found_before};
  __syncthreads();
  return out;
}

struct Descent {
  uint32_t key;  // the order key (sampling_rules::order_key) of the element found
  u64 above;     // mass of the members whose key is greater
};

// Radix descent over 32-bit order keys, 8 bits per pass, from the top: the key v such that the
// members with keys > v hold <= thr of mass and those with keys >= v hold more. With mass 1 per
// member and thr = k - 1 that is the k-th largest key; with weights, the key at which the mass
// ranked above first exceeds thr. member(i, value(i), key, mass) says whether element i takes
// part. Masses are integers: the shared-memory atomics add them exactly, in any order.
template <class Value, class Member>
__device__ Descent radix_descend(int n, const Value& value, Member member, u64 thr, Shared& sh) {
  uint32_t prefix = 0, prefix_mask = 0;
  u64 above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kSampleThreads) sh.hist[b] = 0;
    __syncthreads();
    // A thread adds up its run of elements in one bin before one atomic: rows whose tokens crowd
    // into a few bins (masked rows: all -inf; the first pass: a handful of exponents) would
    // otherwise serialize on those bins' shared-memory atomics.
    int run_bin = -1;
    u64 run_mass = 0;
    for_each_value(n, value, [&](int i, float x) {
      uint32_t key;
      u64 m;
      if (!member(i, x, key, m) || m == 0 || (key & prefix_mask) != prefix) return;
      const int bin = static_cast<int>((key >> shift) & 255u);
      if (bin != run_bin) {
        if (run_mass != 0) atomicAdd(&sh.hist[run_bin], run_mass);
        run_bin = bin;
        run_mass = 0;
      }
      run_mass += m;
    });
    if (run_mass != 0) atomicAdd(&sh.hist[run_bin], run_mass);
    __syncthreads();
    if (threadIdx.x < 32) {
      // Warp 0 picks the bin: lane l holds bins 255 - 8l .. 248 - 8l (lane 0 the highest), a warp
      // scan of the lanes' masses finds the lane where the mass from the top first exceeds thr,
      // and that lane walks its 8 bins. No such bin (not reachable: thr < the members' mass): the
      // last lane walks to bin 0, as a walk over all 256 would.
      const int lane = static_cast<int>(threadIdx.x);
      u64 lane_mass = 0;
      for (int j = 0; j < 8; ++j) lane_mass += sh.hist[255 - 8 * lane - j];
      u64 inclusive = lane_mass;
#pragma unroll
      for (int offset = 1; offset < 32; offset <<= 1) {
        const u64 y = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive += y;
      }
      const unsigned hit = __ballot_sync(0xffffffffu, above + inclusive > thr);
      const int first = hit != 0 ? __ffs(static_cast<int>(hit)) - 1 : 31;
      if (lane == first) {
        u64 a = above + inclusive - lane_mass;
        int sel = 0;
        for (int j = 0; j < 8; ++j) {
          const int b = 255 - 8 * lane - j;
          if (a + sh.hist[b] > thr) {
            sel = b;
            break;
          }
          a += sh.hist[b];
        }
        sh.sel = sel;
        sh.sel_above = a;
      }
    }
    __syncthreads();
    prefix |= static_cast<uint32_t>(sh.sel) << shift;
    prefix_mask |= 255u << shift;
    above = sh.sel_above;
    __syncthreads();
  }
  return Descent{prefix, above};
}

}  // namespace fp4serve::kernels::cuda::sampling_block
