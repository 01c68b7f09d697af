#include "kernels/moe.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kernels/activation.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/cpu/moe_cpu.h"

namespace fp4serve::kernels {
namespace {

TEST(MoeRoute, SoftmaxTopKRenormalizedAndCastToBf16) {
  const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  int32_t idx[3];
  float w[3];
  moe_route(logits, 1, 5, 3, idx, w);
  EXPECT_EQ(idx[0], 1);  // tie between 1 and 3: lower id first
  EXPECT_EQ(idx[1], 3);
  EXPECT_EQ(idx[2], 4);
  const double e1 = std::exp(2.0), e4 = std::exp(1.0), s = 2 * e1 + e4;
  EXPECT_NEAR(w[0], e1 / s, std::ldexp(e1 / s, -8));
  EXPECT_NEAR(w[2], e4 / s, std::ldexp(e4 / s, -8));
  for (float x : w) EXPECT_EQ(x, round_bf16(x));
}

TEST(MoeGroup, GroupsTokensByExpertInTokenOrder) {
  const int32_t idx[] = {2, 0, 0, 2, 1, 2};  // 3 tokens, top-2
  ExpertGroups g = group_by_expert(idx, 3, 2, 4);
  // expert 0: (t0, s1), (t1, s0); expert 1: (t2, s0); expert 2: (t0, s0), (t1, s1), (t2, s1)
  EXPECT_EQ(g.offsets, (std::vector<int32_t>{0, 2, 3, 6, 6}));
  EXPECT_EQ(g.token, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(g.slot, (std::vector<int32_t>{1, 0, 0, 0, 1, 1}));
}

// A small MoE in bf16 or NVFP4 experts.
struct Moe {
  int64_t E = 8, H = 64, I = 32, Is = 48;
  std::vector<uint16_t> router, sgate, gate_up16, down16, sg16, su16, sd16;
  std::vector<uint8_t> gu_p, gu_s, dn_p, dn_s;
  MoeWeights w;
};

Moe make_moe(bool nvfp4, uint32_t seed) {
  Moe m;
  m.router = test::to_bf16(test::random_f32(m.E * m.H, seed, 0.3f));
  m.sgate = test::to_bf16(test::random_f32(m.H, seed + 1, 0.2f));
  m.sg16 = test::to_bf16(test::random_f32(m.Is * m.H, seed + 2, 0.2f));
  m.su16 = test::to_bf16(test::random_f32(m.Is * m.H, seed + 3, 0.2f));
  m.sd16 = test::to_bf16(test::random_f32(m.H * m.Is, seed + 4, 0.2f));
  m.w.router = bf16_weight(m.router.data(), m.E, m.H);
  m.w.shared_gate = bf16_weight(m.sgate.data(), 1, m.H);
  m.w.shared = {bf16_weight(m.sg16.data(), m.Is, m.H), bf16_weight(m.su16.data(), m.Is, m.H),
                bf16_weight(m.sd16.data(), m.H, m.Is)};
  m.w.top_k = 3;
  WeightView gu, dn;  // fused [E*2I, H] and [E*H, I] stacks, sliced per expert
  if (nvfp4) {
    m.gu_p = test::random_bytes(m.E * 2 * m.I * m.H / 2, seed + 5);
    m.gu_s = test::random_bytes(m.E * 2 * m.I * m.H / 16, seed + 6, 0x20, 0x38);
    m.dn_p = test::random_bytes(m.E * m.H * m.I / 2, seed + 7);
    m.dn_s = test::random_bytes(m.E * m.H * m.I / 16, seed + 8, 0x20, 0x38);
    gu = nvfp4_weight(m.gu_p.data(), m.gu_s.data(), 0.05f, m.E * 2 * m.I, m.H);
    dn = nvfp4_weight(m.dn_p.data(), m.dn_s.data(), 0.05f, m.E * m.H, m.I);
  } else {
    m.gate_up16 = test::to_bf16(test::random_f32(m.E * 2 * m.I * m.H, seed + 5, 0.2f));
    m.down16 = test::to_bf16(test::random_f32(m.E * m.H * m.I, seed + 6, 0.2f));
    gu = bf16_weight(m.gate_up16.data(), m.E * 2 * m.I, m.H);
    dn = bf16_weight(m.down16.data(), m.E * m.H, m.I);
  }
  for (int64_t e = 0; e < m.E; ++e)
    m.w.experts.push_back({slice_rows(gu, e * 2 * m.I, m.I), slice_rows(gu, e * 2 * m.I + m.I, m.I),
                           slice_rows(dn, e * m.H, m.H)});
  return m;
}

// HF's eager forward written out with double dot products and the same bf16 casts.
std::vector<float> reference(const Moe& m, const std::vector<float>& x, int64_t T, MoeCombine combine) {
  auto dot = [](const float* a, const std::vector<float>& W, int64_t row, int64_t K) {
    double s = 0;
    for (int64_t k = 0; k < K; ++k) s += double(a[k]) * W[row * K + k];
    return round_bf16(static_cast<float>(s));
  };
  auto R = dequantize_full(m.w.router);
  auto SG = dequantize_full(m.w.shared_gate);
  auto G = dequantize_full(m.w.shared.gate), U = dequantize_full(m.w.shared.up), Dn = dequantize_full(m.w.shared.down);
  std::vector<float> out(T * m.H);
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x.data() + t * m.H;
    std::vector<float> logits(m.E);
    for (int64_t e = 0; e < m.E; ++e) logits[e] = dot(xt, R, e, m.H);
    std::vector<int32_t> idx(m.w.top_k);
    std::vector<float> rw(m.w.top_k);
    moe_route(logits.data(), 1, static_cast<int>(m.E), m.w.top_k, idx.data(), rw.data());
    // Visit order: ascending expert id (eager) or top-k slot order (index_add over slots / fp32 sum).
    std::vector<int> order;
    for (int64_t e = 0; e < m.E; ++e)
      for (int i = 0; i < m.w.top_k; ++i)
        if (idx[i] == e) order.push_back(i);
    if (combine != MoeCombine::kHfEager)
      for (int i = 0; i < m.w.top_k; ++i) order[i] = i;
    std::vector<float> acc(m.H, 0.0f);
    for (int s : order) {
      const int64_t e = idx[s];
      auto eg = dequantize_full(m.w.experts[e].gate), eu = dequantize_full(m.w.experts[e].up),
           ed = dequantize_full(m.w.experts[e].down);
      std::vector<float> h(m.I);
      for (int64_t i = 0; i < m.I; ++i)
        h[i] = round_bf16(round_bf16(silu(dot(xt, eg, i, m.H))) * dot(xt, eu, i, m.H));
      for (int64_t o = 0; o < m.H; ++o) {
        const float r = round_bf16(dot(h.data(), ed, o, m.I) * rw[s]);
        acc[o] = combine == MoeCombine::kFp32Sum ? acc[o] + r : round_bf16(acc[o] + r);
      }
    }
    if (combine == MoeCombine::kFp32Sum)
      for (auto& a : acc) a = round_bf16(a);
    std::vector<float> h(m.Is);
    for (int64_t i = 0; i < m.Is; ++i) h[i] = round_bf16(round_bf16(silu(dot(xt, G, i, m.H))) * dot(xt, U, i, m.H));
    const float sg = round_bf16(sigmoid(dot(xt, SG, 0, m.H)));
    for (int64_t o = 0; o < m.H; ++o)
      out[t * m.H + o] = round_bf16(acc[o] + round_bf16(sg * dot(h.data(), Dn, o, m.Is)));
  }
  return out;
}

TEST(MoeBlock, MatchesHfCastOrderWithDoubleDots) {
  for (auto [nvfp4, combine] : {std::pair{false, MoeCombine::kHfEager}, std::pair{true, MoeCombine::kHfEager},
                                std::pair{false, MoeCombine::kHfIndexAddSlots}, std::pair{true, MoeCombine::kFp32Sum}}) {
    Moe m = make_moe(nvfp4, 10);
    const int64_t T = 6;
    auto xv = test::random_bf16_values(T * m.H, 11);
    auto x = test::to_bf16(xv);
    std::vector<uint16_t> out(T * m.H);
    moe_block(x.data(), T, m.w, out.data(), Isa::kScalar, combine);
    auto ref = reference(m, xv, T, combine);
    for (int64_t t = 0; t < T; ++t) {
      double mx = 0;
      for (int64_t o = 0; o < m.H; ++o) mx = std::max(mx, double(std::fabs(ref[t * m.H + o])));
      int exact = 0;
      for (int64_t o = 0; o < m.H; ++o) {
        const float got = bf16_bits_to_f32(out[t * m.H + o]);
        // fp32 vs double dot sums can flip an intermediate bf16 rounding: allow a few ulps of the row scale.
        ASSERT_NEAR(got, ref[t * m.H + o], std::ldexp(mx, -6))
            << "nvfp4=" << nvfp4 << " combine=" << int(combine) << " t=" << t << " o=" << o;
        exact += got == ref[t * m.H + o];
      }
      EXPECT_GE(exact, m.H * 3 / 4) << "most elements should agree exactly";
    }
  }
}

TEST(MoeBlock, CombineOrdersDifferOnlyInRounding) {
  Moe m = make_moe(false, 30);
  const int64_t T = 16;
  auto x = test::to_bf16(test::random_f32(T * m.H, 31));
  std::vector<uint16_t> a(T * m.H), b(T * m.H), c(T * m.H);
  moe_block(x.data(), T, m.w, a.data(), Isa::kScalar, MoeCombine::kHfEager);
  moe_block(x.data(), T, m.w, b.data(), Isa::kScalar, MoeCombine::kHfIndexAddSlots);
  moe_block(x.data(), T, m.w, c.data(), Isa::kScalar, MoeCombine::kFp32Sum);
  int diff_ab = 0, diff_ac = 0;
  for (int64_t i = 0; i < T * m.H; ++i) {
    float row_max = 0;  // partial sums round at the scale of the row, not of the element
    for (int64_t j = i / m.H * m.H; j < (i / m.H + 1) * m.H; ++j) row_max = std::max(row_max, std::fabs(bf16_bits_to_f32(a[j])));
    const float fa = bf16_bits_to_f32(a[i]), fb = bf16_bits_to_f32(b[i]), fc = bf16_bits_to_f32(c[i]);
    ASSERT_NEAR(fa, fb, std::ldexp(row_max, -5));
    ASSERT_NEAR(fa, fc, std::ldexp(row_max, -5));
    diff_ab += a[i] != b[i];
    diff_ac += a[i] != c[i];
  }
  EXPECT_GT(diff_ab + diff_ac, 0) << "the three orders should not be bit-identical on random data";
}

TEST(MoeBlock, TokenResultIndependentOfBatchThreadsAndPath) {
  Moe m = make_moe(true, 20);
  const int64_t T = 9;
  auto x = test::to_bf16(test::random_f32(T * m.H, 21));
  std::vector<uint16_t> ref(T * m.H);
  cpu::set_num_threads(2);
  moe_block(x.data(), T, m.w, ref.data(), Isa::kScalar);
  for (Isa isa : test::isas()) {
    // Paths that are not bit-identical to scalar (avx512_bf16) are compared with themselves at 2
    // threads, and with scalar to a couple of bf16 ulps of the row scale.
    std::vector<uint16_t> own = ref;
    if (!test::bit_exact_with_scalar(isa)) {
      cpu::set_num_threads(2);
      moe_block(x.data(), T, m.w, own.data(), isa);
      for (int64_t i = 0; i < T * m.H; ++i) {
        float row_max = 0;
        for (int64_t j = i / m.H * m.H; j < (i / m.H + 1) * m.H; ++j)
          row_max = std::max(row_max, std::fabs(bf16_bits_to_f32(ref[j])));
        ASSERT_NEAR(bf16_bits_to_f32(own[i]), bf16_bits_to_f32(ref[i]), std::ldexp(row_max, -6))
            << cpu::isa_name(isa) << " i=" << i;
      }
    }
    for (int threads : {1, 2}) {
      cpu::set_num_threads(threads);
      std::vector<uint16_t> out(T * m.H);
      moe_block(x.data(), T, m.w, out.data(), isa);
      EXPECT_EQ(out, own) << cpu::isa_name(isa) << " threads " << threads;
      for (int64_t t : {0, 4, 8}) {
        std::vector<uint16_t> one(m.H);
        moe_block(x.data() + t * m.H, 1, m.w, one.data(), isa);
        EXPECT_TRUE(std::equal(one.begin(), one.end(), own.begin() + t * m.H)) << "token " << t << " alone";
      }
    }
  }
  cpu::set_num_threads(0);
}

}  // namespace
}  // namespace fp4serve::kernels
