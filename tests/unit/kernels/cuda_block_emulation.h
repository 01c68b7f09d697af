// A CUDA thread block emulated on the CPU, for running device code written for one block per row
// (the sampling kernels' sampling_select.cuh) in the unit tests, where there is no GPU: every CUDA
// thread is an OS thread, __syncthreads a barrier of the block, warp shuffles and ballots an
// exchange behind a barrier of the warp, shared-memory atomics std::atomic_ref, and cub's block
// reduce and scan the same collectives done by thread 0 in thread order. It checks the code's
// indexing, its collectives' use and its synchronization structure (a missing barrier shows up as a
// race or a deadlock here too); not the hardware's memory model or its timing.
//
// Include this before any header that holds device code; they see FP4SERVE_CUDA_EMULATION and
// leave out the CUDA headers.
#pragma once

#define FP4SERVE_CUDA_EMULATION 1

#include <array>
#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline

namespace fp4serve::cuda_emulation {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};

struct Block {
  explicit Block(int n) : threads(n), barrier(n), slots(static_cast<std::size_t>(n)) {
    for (int w = 0; w < (n + 31) / 32; ++w)
      warp_barriers.push_back(std::make_unique<std::barrier<>>(std::min(32, n - w * 32)));
  }
  int threads;
  std::barrier<> barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  std::vector<std::array<unsigned char, 32>> slots;  // one exchange slot per thread
};

inline thread_local Block* block = nullptr;
inline thread_local Dim3 thread_idx, block_idx;

template <class T>
void put(const T& v) {
  static_assert(sizeof(T) <= 32);
  std::memcpy(block->slots[thread_idx.x].data(), &v, sizeof(T));
}
template <class T>
T get(unsigned thread) {
  T v;
  std::memcpy(&v, block->slots[thread].data(), sizeof(T));
  return v;
}
inline void warp_sync() { block->warp_barriers[thread_idx.x / 32]->arrive_and_wait(); }

// Runs fn() on `threads` threads as block `index` of a launch.
template <class Fn>
void run_block(int threads, unsigned index, Fn fn) {
  Block b(threads);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&b, &fn, t, index] {
      block = &b;
      thread_idx.x = static_cast<unsigned>(t);
      block_idx.x = index;
      fn();
    });
  for (std::thread& t : pool) t.join();
}

}  // namespace fp4serve::cuda_emulation

#define threadIdx (::fp4serve::cuda_emulation::thread_idx)
#define blockIdx (::fp4serve::cuda_emulation::block_idx)

inline void __syncthreads() { ::fp4serve::cuda_emulation::block->barrier.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { ::fp4serve::cuda_emulation::warp_sync(); }

// Lane `src` of the caller's warp's value (own value when src is outside the warp).
template <class T>
T emulated_shuffle(T v, int src) {
  namespace e = ::fp4serve::cuda_emulation;
  e::put(v);
  e::warp_sync();
  const unsigned base = e::thread_idx.x / 32 * 32;
  const T out = (src >= 0 && src < 32) ? e::get<T>(base + static_cast<unsigned>(src)) : v;
  e::warp_sync();
  return out;
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned offset) {
  return emulated_shuffle(v, static_cast<int>(threadIdx.x % 32) - static_cast<int>(offset));
}
template <class T>
T __shfl_sync(unsigned, T v, int lane) {
  return emulated_shuffle(v, lane);
}
inline unsigned __ballot_sync(unsigned, bool predicate) {
  namespace e = ::fp4serve::cuda_emulation;
  e::put(static_cast<int>(predicate));
  e::warp_sync();
  const unsigned base = e::thread_idx.x / 32 * 32;
  unsigned bits = 0;
  for (unsigned l = 0; l < 32 && base + l < static_cast<unsigned>(e::block->threads); ++l)
    bits |= e::get<int>(base + l) ? 1u << l : 0u;
  e::warp_sync();
  return bits;
}
inline int __ffs(int x) { return x == 0 ? 0 : std::countr_zero(static_cast<unsigned>(x)) + 1; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*p).fetch_add(v);
}
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }
inline int min(int a, int b) { return a < b ? a : b; }
using std::isfinite;

namespace cub {

// cub::BlockReduce: the result in every thread (cub promises it in thread 0 only).
template <class T, int kThreads>
struct BlockReduce {
  struct TempStorage {};
  explicit BlockReduce(TempStorage&) {}
  template <class Op>
  T Reduce(T v, Op op) {
    namespace e = ::fp4serve::cuda_emulation;
    e::put(v);
    __syncthreads();
    T r = e::get<T>(0);
    for (int t = 1; t < e::block->threads; ++t) r = op(r, e::get<T>(static_cast<unsigned>(t)));
    __syncthreads();
    return r;
  }
  T Sum(T v) {
    return Reduce(v, [](const T& a, const T& b) { return a + b; });
  }
};

template <class T, int kThreads>
struct BlockScan {
  struct TempStorage {};
  explicit BlockScan(TempStorage&) {}
  void ExclusiveSum(T v, T& out, T& aggregate) {
    namespace e = ::fp4serve::cuda_emulation;
    e::put(v);
    __syncthreads();
    out = T{};
    aggregate = T{};
    for (int t = 0; t < e::block->threads; ++t) {
      if (t == static_cast<int>(e::thread_idx.x)) out = aggregate;
      aggregate = aggregate + e::get<T>(static_cast<unsigned>(t));
    }
    __syncthreads();
  }
  void ExclusiveSum(T v, T& out) {
    T aggregate;
    ExclusiveSum(v, out, aggregate);
  }
};

}  // namespace cub
