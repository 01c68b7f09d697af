// The CUDA MoE kernels' thread structure replayed on the CPU: the same __host__ __device__ steps
// (moe_route.h, moe_sort.h) for 32 simulated lanes with the kernels' shuffle trees, and the sort
// kernels block by block. Shared by the cuda_moe_* tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/moe_route.h"
#include "kernels/cuda/moe_sort.h"

namespace fp4serve::kernels::cuda::sim {

constexpr int kLanes = 32;

// __shfl_xor_sync butterfly: every lane ends with combine over all lanes, in the kernel's tree.
template <class V, class F>
inline void butterfly(std::array<V, kLanes>& v, F combine) {
  for (int off = kLanes / 2; off > 0; off >>= 1) {
    const std::array<V, kLanes> before = v;
    for (int l = 0; l < kLanes; ++l) v[l] = combine(before[l], before[l ^ off]);
  }
}

// moe_route_kernel's body for one token, its lanes run one after another.
inline void route_as_warp(const float* logits, int E, int k, int32_t* idx, float* w) {
  std::vector<float> p(static_cast<size_t>(E));
  std::array<float, kLanes> mx;
  for (int l = 0; l < kLanes; ++l) mx[l] = moe::lane_load_max(logits, p.data(), E, l, kLanes);
  butterfly(mx, moe::max_of);
  for (int l = 0; l < kLanes; ++l) moe::lane_exp(p.data(), E, l, kLanes, mx[l]);
  const float sum = moe::serial_sum(p.data(), E);
  for (int l = 0; l < kLanes; ++l) moe::lane_scale(p.data(), E, l, kLanes, sum);
  for (int j = 0; j < k; ++j) {
    std::array<moe::Cand, kLanes> c;
    for (int l = 0; l < kLanes; ++l) c[l] = moe::lane_best(p.data(), E, l, kLanes);
    butterfly(c, moe::first_of);
    for (int l = 1; l < kLanes; ++l) ASSERT_EQ(c[l].e, c[0].e) << "lanes disagree on the winner";
    ASSERT_GE(c[0].e, 0);
    ASSERT_LT(c[0].e, E);
    p[static_cast<size_t>(c[0].e)] = -INFINITY;  // by lane e % 32
    idx[j] = c[0].e;
    w[j] = c[0].p;
  }
  moe::renormalize(w, k);
}

struct Sorted {
  std::vector<int32_t> offsets, row_token, row_of;
};

// The count, scan and place kernels' steps, block by block.
inline Sorted sort_as_kernels(const std::vector<int32_t>& idx, int E, int k) {
  const int64_t pairs = static_cast<int64_t>(idx.size());
  const int chunks = static_cast<int>((pairs + moe::kSortChunk - 1) / moe::kSortChunk);
  std::vector<int32_t> hist(static_cast<size_t>(chunks) * E), totals(static_cast<size_t>(E));
  Sorted s;
  s.offsets.resize(static_cast<size_t>(E) + 1);
  s.row_token.assign(static_cast<size_t>(pairs), -1);
  s.row_of.assign(static_cast<size_t>(pairs), -1);
  auto chunk_n = [&](int c) { return static_cast<int>(std::min<int64_t>(moe::kSortChunk, pairs - int64_t{c} * moe::kSortChunk)); };
  for (int c = 0; c < chunks; ++c)
    for (int e = 0; e < E; ++e) hist[c * E + e] = moe::count_expert(idx.data() + c * moe::kSortChunk, chunk_n(c), e);
  for (int e = 0; e < E; ++e) totals[e] = moe::column_exclusive(hist.data(), chunks, E, e);
  moe::exclusive_offsets(totals.data(), E, s.offsets.data());
  for (int e = 0; e < E; ++e) moe::column_add(hist.data(), chunks, E, e, s.offsets[e]);
  for (int c = 0; c < chunks; ++c)
    for (int i = 0; i < chunk_n(c); ++i) {
      const int64_t pair = int64_t{c} * moe::kSortChunk + i;
      const int32_t row = moe::grouped_row(idx.data() + c * moe::kSortChunk, i, hist.data() + c * E);
      EXPECT_EQ(s.row_token[row], -1) << "row " << row << " placed twice";
      s.row_token[row] = static_cast<int32_t>(pair / k);
      s.row_of[pair] = row;
    }
  return s;
}

}  // namespace fp4serve::kernels::cuda::sim
