// The CUDA MoE block's arithmetic on the CPU: the __host__ __device__ steps its kernels call
// (moe_math.h, moe_route.h, moe_sort.h), run here for 32 simulated lanes with the kernels' shuffle
// trees, against the CPU backend (moe_cpu.cpp's moe_route and group_by_expert, activation.h) bit
// for bit. This is the evidence for the GPU's routing where no GPU is at hand: the kernels only
// distribute these steps over threads.
#if defined(FP4SERVE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/activation.h"
#include "kernels/cpu/moe_cpu.h"
#include "cuda_moe_sim.h"

namespace fp4serve::kernels::cuda {
namespace {

using sim::route_as_warp;
using sim::sort_as_kernels;
using sim::Sorted;

// Router logits as moe_block hands them to moe_route: f32 from the linear, the CPU rounds them to
// bf16 first (route_as_warp rounds them itself, as the kernel does).
struct Logits {
  std::vector<float> raw, rounded;
};

Logits make_logits(int64_t T, int E, uint32_t seed, int style) {
  Logits l;
  std::mt19937 rng(seed);
  std::normal_distribution<float> wide(0.0f, 2.0f);
  std::uniform_int_distribution<int> small(-2, 2);
  l.raw.resize(static_cast<size_t>(T * E));
  for (float& x : l.raw) {
    switch (style) {
      case 0: x = wide(rng); break;                                // distinct values
      case 1: x = static_cast<float>(small(rng)) * 0.25f; break;  // many exact ties
      case 2: x = 1.5f; break;                                     // all tied
      default: x = wide(rng) * 40.0f; break;                       // far apart: many p underflow to 0
    }
  }
  l.rounded = l.raw;
  for (float& x : l.rounded) x = round_bf16(x);
  return l;
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CudaMoeRoute, WarpStepsPickTheCpuExpertsAndWeightsBitForBit) {
  struct Case {
    int E, k;
  };
  for (const Case c : {Case{256, 8}, Case{256, 1}, Case{8, 4}, Case{8, 8}, Case{40, 3}, Case{64, 2}, Case{1024, 8},
                       Case{1, 1}, Case{33, 33}}) {
    for (int style = 0; style < 4; ++style) {
      const int64_t T = 37;
      const Logits l = make_logits(T, c.E, static_cast<uint32_t>(1000 * c.E + 10 * c.k + style), style);
      std::vector<int32_t> want_idx(static_cast<size_t>(T * c.k)), got_idx(want_idx.size());
      std::vector<float> want_w(want_idx.size()), got_w(want_idx.size());
      moe_route(l.rounded.data(), T, c.E, c.k, want_idx.data(), want_w.data());
      for (int64_t t = 0; t < T; ++t)
        route_as_warp(l.raw.data() + t * c.E, c.E, c.k, got_idx.data() + t * c.k, got_w.data() + t * c.k);
      SCOPED_TRACE(testing::Message() << "E=" << c.E << " k=" << c.k << " style=" << style);
      EXPECT_EQ(got_idx, want_idx);
      EXPECT_TRUE(same_floats(got_w, want_w));
    }
  }
}

TEST(CudaMoeRoute, TiesGoToTheLowerExpertId) {
  // Experts 3 and 1 tie for first, 0, 2 and 4 for second: rank order 1, 3, then 0, 2.
  const float logits[] = {0.5f, 2.0f, 0.5f, 2.0f, 0.5f};
  int32_t idx[4];
  float w[4];
  route_as_warp(logits, 5, 4, idx, w);
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 3);
  EXPECT_EQ(idx[2], 0);
  EXPECT_EQ(idx[3], 2);
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[2], w[3]);
  EXPECT_GT(w[0], w[2]);
}

// Garbage in (NaN or infinite logits) must still give k distinct ids in range: the sort and the
// combine index memory with them.
TEST(CudaMoeRoute, NonFiniteLogitsStillGiveDistinctValidExperts) {
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    for (const int which : {0, 1, 2}) {  // one bad logit, half of them, all
      const int E = 64, k = 8;
      std::vector<float> logits = test::random_f32(E, 3, 1.0f);
      for (int e = 0; e < E; ++e)
        if ((which == 0 && e == 5) || (which == 1 && e % 2 == 0) || which == 2) logits[e] = bad;
      int32_t idx[k];
      float w[k];
      route_as_warp(logits.data(), E, k, idx, w);
      std::vector<bool> seen(E);
      for (int j = 0; j < k; ++j) {
        ASSERT_GE(idx[j], 0);
        ASSERT_LT(idx[j], E);
        EXPECT_FALSE(seen[idx[j]]) << "expert " << idx[j] << " twice";
        seen[idx[j]] = true;
      }
    }
  }
}

TEST(CudaMoeRoute, CombineOrderIsAscendingExpertId) {
  const int32_t idx[] = {7, 2, 200, 0, 31, 32, 5, 6};
  int32_t order[8];
  moe::combine_order(idx, 8, order);
  EXPECT_EQ(std::vector<int32_t>(order, order + 8), (std::vector<int32_t>{3, 1, 6, 7, 0, 4, 5, 2}));
  const int32_t one[] = {9};
  moe::combine_order(one, 1, order);
  EXPECT_EQ(order[0], 0);
}

// ---- element math -------------------------------------------------------------------------------

TEST(CudaMoeMath, Bf16RoundingMatchesTheCpuOnEveryClassOfValue) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = bits(rng);
    if (i < 64) u = i < 32 ? (0x7F800000u | (u & 0x807FFFFFu)) : (0x7F7F0000u | (u & 0x8000FFFFu));  // NaN/Inf, near max
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(moe::bf16_bits(f), f32_to_bf16_bits(f)) << std::hex << u;
  }
}

// silu and sigmoid only ever see bf16 values (the kernels round their inputs first): all of them.
TEST(CudaMoeMath, SiluAndSigmoidMatchGlibcOnEveryBf16Input) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float x = bf16_bits_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(x)) continue;
    ASSERT_TRUE(test::same_bits(moe::silu(x), silu(x))) << "silu(" << x << ")";
    ASSERT_TRUE(test::same_bits(moe::sigmoid(x), sigmoid(x))) << "sigmoid(" << x << ")";
  }
}

// exp_f32 is glibc's expf evaluated step by step: a sweep over the float range (every 4099th bit
// pattern; every third one was checked once, offline), and the case where the correctly rounded
// result differs from glibc's.
TEST(CudaMoeMath, ExpIsGlibcExpfAcrossTheFloatRange) {
  int64_t checked = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 4099) {
    float x;
    const uint32_t b = static_cast<uint32_t>(u);
    std::memcpy(&x, &b, 4);
    if (std::isnan(x)) continue;
    ASSERT_TRUE(test::same_bits(moe::exp_f32(x), std::exp(x))) << "exp(" << x << ")";
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
  for (float x : {-0.1005859375f, 0.0f, -0.0f, -INFINITY, INFINITY, 88.7f, 88.8f, -103.9f, -104.0f, -87.5f, 1e-30f})
    EXPECT_TRUE(test::same_bits(moe::exp_f32(x), std::exp(x))) << "exp(" << x << ")";
  EXPECT_TRUE(std::isnan(moe::exp_f32(NAN)));
  // Not the correctly rounded value: exactly glibc's.
  EXPECT_NE(moe::exp_f32(-0.1005859375f), static_cast<float>(std::exp(-0.1005859375)));
}

// The softmax's exp takes l - mx of two bf16 values (l <= mx): every l in a wide range against a
// spread of maxima.
TEST(CudaMoeMath, SoftmaxExpMatchesGlibcOnBf16Differences) {
  std::vector<float> values;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float x = bf16_bits_to_f32(static_cast<uint16_t>(b));
    if (std::isfinite(x) && std::fabs(x) <= 128.0f) values.push_back(x);
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  int64_t checked = 0;
  for (int m = 0; m < 100; ++m) {
    const float mx = m < 4 ? std::array<float, 4>{0.0f, 1.0f, -3.0f, 17.5f}[m] : values[pick(rng)];
    for (float l : values) {
      if (l > mx) continue;
      const float d = l - mx;
      ASSERT_TRUE(test::same_bits(moe::exp_f32(d), std::exp(d))) << "exp(" << l << " - " << mx << ")";
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000000);
}

TEST(CudaMoeMath, ElementStepsFollowTheCpuFormulas) {
  const std::vector<float> g = test::random_f32(20000, 1, 3.0f), u = test::random_f32(20000, 2, 3.0f);
  const std::vector<float> w = test::random_bf16_values(20000, 3, 0.3f);
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_TRUE(test::same_bits(moe::swiglu(g[i], u[i]), round_bf16(round_bf16(silu(round_bf16(g[i]))) * round_bf16(u[i]))));
    const float acc = round_bf16(u[i]);
    ASSERT_TRUE(test::same_bits(moe::add_routed(acc, g[i], w[i]), round_bf16(acc + round_bf16(round_bf16(g[i]) * w[i]))));
    const float gate = round_bf16(sigmoid(round_bf16(w[i] * 20.0f)));
    ASSERT_TRUE(test::same_bits(moe::shared_gate(w[i] * 20.0f), gate));
    ASSERT_TRUE(test::same_bits(moe::add_shared(acc, gate, g[i]), round_bf16(acc + round_bf16(gate * round_bf16(g[i])))));
  }
}

// ---- the expert sort ----------------------------------------------------------------------------

// moe_route_sort_small_kernel's sort (one chunk; the offsets are the base of every pair).
Sorted sort_as_small_kernel(const std::vector<int32_t>& idx, int E, int k) {
  const int n = static_cast<int>(idx.size());
  EXPECT_LE(n, moe::kSortChunk);
  std::vector<int32_t> totals(static_cast<size_t>(E));
  Sorted s;
  s.offsets.resize(static_cast<size_t>(E) + 1);
  s.row_token.assign(idx.size(), -1);
  s.row_of.assign(idx.size(), -1);
  for (int e = 0; e < E; ++e) totals[e] = moe::count_expert(idx.data(), n, e);
  moe::exclusive_offsets(totals.data(), E, s.offsets.data());
  for (int i = 0; i < n; ++i) {
    const int32_t row = moe::grouped_row(idx.data(), i, s.offsets.data());
    s.row_token[row] = i / k;
    s.row_of[i] = row;
  }
  return s;
}

TEST(CudaMoeSort, KernelStepsGroupPairsAsTheCpuDoes) {
  struct Case {
    int64_t T;
    int E, k, style;
  };
  // Pair counts below, at and across chunk edges (256), skewed and spread routings.
  for (const Case c : {Case{1, 256, 8, 0}, Case{8, 256, 8, 0}, Case{32, 256, 8, 1}, Case{33, 256, 8, 0},
                       Case{64, 256, 8, 3}, Case{300, 256, 8, 1}, Case{19, 8, 4, 0}, Case{7, 40, 3, 2},
                       Case{129, 1024, 8, 0}, Case{5, 1, 1, 0}}) {
    const Logits l = make_logits(c.T, c.E, static_cast<uint32_t>(c.T * 31 + c.E), c.style);
    std::vector<int32_t> idx(static_cast<size_t>(c.T * c.k));
    std::vector<float> w(idx.size());
    moe_route(l.rounded.data(), c.T, c.E, c.k, idx.data(), w.data());
    const ExpertGroups want = group_by_expert(idx.data(), c.T, c.k, c.E);
    SCOPED_TRACE(testing::Message() << "T=" << c.T << " E=" << c.E << " k=" << c.k << " style=" << c.style);
    std::vector<Sorted> ways = {sort_as_kernels(idx, c.E, c.k)};
    if (idx.size() <= static_cast<size_t>(moe::kSortChunk)) ways.push_back(sort_as_small_kernel(idx, c.E, c.k));
    for (const Sorted& got : ways) {
      EXPECT_EQ(got.offsets, want.offsets);
      EXPECT_EQ(got.row_token, want.token);
      for (size_t r = 0; r < want.token.size(); ++r)
        EXPECT_EQ(got.row_of[static_cast<size_t>(want.token[r]) * c.k + want.slot[r]], static_cast<int32_t>(r));
    }
  }
}

}  // namespace
}  // namespace fp4serve::kernels::cuda

#endif  // FP4SERVE_HAVE_CUDA
