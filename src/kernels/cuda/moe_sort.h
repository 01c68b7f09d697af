// The counting sort of a step's (token, slot) pairs by expert, as __host__ __device__ steps over
// plain arrays (the sort kernels in moe_route.cu call them; tests/unit/kernels/cuda_moe_sort_test.cpp
// runs them on the CPU against moe_cpu.cpp's group_by_expert).
//
// Pairs are numbered i = t * top_k + s (the idx array of the route kernel). The grouped order is
// moe_cpu.cpp's: experts ascending, and within an expert its pairs in ascending i, i.e. ascending
// token (a token routes to an expert at most once). It is computed without atomics, in three
// launches whose grids depend only on the pair count:
//   count  per chunk of kSortChunk pairs and per expert e: hist[c][e] = pairs of the chunk on e
//   scan   one block: offsets[e] = sum of all counts of experts < e, and hist[c][e] becomes the
//          first grouped row of chunk c's pairs on e (offsets[e] + counts of earlier chunks on e)
//   place  per pair i of chunk c on expert e: row = hist[c][e] + (pairs j < i of chunk c on e)
// Every value is an integer count, so the result is the same whatever the threads' timing.
#pragma once

#include <cstdint>

#include "kernels/cuda/moe_math.h"

namespace fp4serve::kernels::cuda::moe {

inline constexpr int kSortChunk = 256;  // pairs per block of the count and place kernels
inline constexpr int kMaxExperts = 1024;  // the scan kernel's shared table

// count: pairs among ids[0..n) routed to expert e.
FP4_MOE_HD int32_t count_expert(const int32_t* ids, int n, int32_t e) {
  int32_t c = 0;
  for (int j = 0; j < n; ++j) c += ids[j] == e ? 1 : 0;
  return c;
}

// scan, per expert: column e of hist [chunks, E] turned into its exclusive prefix; returns the
// expert's total. Eight loads are issued before their stores, so that on the GPU (one thread per
// column, up to 256 chunks at 8192 tokens) the memory latency is paid once per eight chunks rather
// than once per chunk (a store to hist could alias a later load, so the compiler would not reorder).
FP4_MOE_HD int32_t column_exclusive(int32_t* hist, int chunks, int E, int e) {
  constexpr int kBatch = 8;
  int32_t run = 0;
  for (int c0 = 0; c0 < chunks; c0 += kBatch) {
    int32_t n[kBatch];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < kBatch; ++j) n[j] = c0 + j < chunks ? hist[(c0 + j) * E + e] : 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < kBatch; ++j) {
      if (c0 + j < chunks) hist[(c0 + j) * E + e] = run;
      run += n[j];
    }
  }
  return run;
}

// scan, one thread: offsets[0] = 0, offsets[e + 1] = offsets[e] + totals[e].
FP4_MOE_HD void exclusive_offsets(const int32_t* totals, int E, int32_t* offsets) {
  offsets[0] = 0;
  for (int e = 0; e < E; ++e) offsets[e + 1] = offsets[e] + totals[e];
}

// scan, per expert: column e of hist += offsets[e] (first grouped row of each chunk's pairs on e).
FP4_MOE_HD void column_add(int32_t* hist, int chunks, int E, int e, int32_t base) {
  for (int c = 0; c < chunks; ++c) hist[c * E + e] += base;
}

// place: the grouped row of pair i of a chunk (ids = the chunk's expert ids, base = its hist row).
FP4_MOE_HD int32_t grouped_row(const int32_t* ids, int i, const int32_t* base) {
  const int32_t e = ids[i];
  return base[e] + count_expert(ids, i, e);
}

}  // namespace fp4serve::kernels::cuda::moe
