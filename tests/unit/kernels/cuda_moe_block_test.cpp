// The CUDA MoE block's host half on the CPU: the scratch plan (moe_plan.h), the weight checks, and
// the whole pipeline of moe_cuda.cu replayed on the host -- the plan's regions carved from one
// buffer, the kernels' steps for every thread (cuda_moe_sim.h, moe_math.h), the CPU linear standing
// in for linears()/grouped_linear() (whose contract is "each row equals the linear of that row
// alone") -- against moe_cpu.cpp's moe_block bit for bit. What this cannot check is the device code
// itself (index math inside the kernels, shuffles, launches): that waits for a GPU.
#if defined(FP4SERVE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <stdexcept>
#include <vector>

#include "cuda_moe_sim.h"
#include "kernel_test_util.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/cpu/moe_cpu.h"
#include "kernels/cuda/moe_math.h"
#include "kernels/cuda/moe_plan.h"

namespace fp4serve::kernels::cuda {
namespace {

// ---- the plan -----------------------------------------------------------------------------------

MoeDims dims(int64_t T, int64_t H, int64_t I, int64_t Is, int64_t E, int64_t k) {
  MoeDims d;
  d.tokens = T;
  d.hidden = H;
  d.intermediate = I;
  d.shared_intermediate = Is;
  d.experts = E;
  d.top_k = k;
  return d;
}

std::vector<MoeRegion> regions(const MoePlan& p) {
  return {p.logits, p.idx,  p.weight, p.hist, p.offsets, p.row_token, p.row_of, p.x_sorted, p.gate,
          p.up,     p.act,  p.down,   p.s_gate, p.s_up, p.s_score, p.s_act, p.s_down};
}

TEST(CudaMoePlan, RegionsAreAlignedDisjointAndSizedForTheShapes) {
  for (const MoeDims& d : {dims(1, 2048, 512, 512, 256, 8), dims(64, 2048, 512, 512, 256, 8),
                           dims(8192, 2048, 512, 512, 256, 8), dims(19, 64, 32, 0, 8, 4), dims(0, 64, 32, 48, 8, 2)}) {
    const MoePlan p = plan_moe(d);
    const int64_t T = d.tokens, R = T * d.top_k;
    EXPECT_EQ(p.pairs, R);
    EXPECT_EQ(p.sort_chunks, (R + 255) / 256);
    EXPECT_EQ(p.logits.bytes, static_cast<size_t>(T * d.experts * 4));
    EXPECT_EQ(p.hist.bytes, static_cast<size_t>(p.sort_chunks * d.experts * 4));
    EXPECT_EQ(p.offsets.bytes, static_cast<size_t>((d.experts + 1) * 4));
    EXPECT_EQ(p.x_sorted.bytes, static_cast<size_t>(R * d.hidden * 2));
    EXPECT_EQ(p.act.bytes, static_cast<size_t>(R * d.intermediate * 2));
    EXPECT_EQ(p.down.bytes, static_cast<size_t>(R * d.hidden * 4));
    EXPECT_EQ(p.s_down.bytes, static_cast<size_t>(d.shared_intermediate > 0 ? T * d.hidden * 4 : 0));
    EXPECT_EQ(p.s_score.bytes, static_cast<size_t>(d.shared_intermediate > 0 ? T * 4 : 0));
    const std::vector<MoeRegion> rs = regions(p);
    auto same = [](const MoeRegion& a, const MoeRegion& b) { return a.offset == b.offset && a.bytes == b.bytes; };
    // Written only after the other's last reader (SwiGLU): the only overlaps allowed.
    auto may_share = [&](const MoeRegion& a, const MoeRegion& b) {
      for (const MoeRegion& in : {p.x_sorted, p.gate, p.up})
        if ((same(a, p.down) && same(b, in)) || (same(b, p.down) && same(a, in))) return true;
      for (const MoeRegion& in : {p.s_gate, p.s_up})
        if ((same(a, p.s_down) && same(b, in)) || (same(b, p.s_down) && same(a, in))) return true;
      return false;
    };
    for (size_t i = 0; i < rs.size(); ++i) {
      EXPECT_EQ(rs[i].offset % kMoeAlign, 0u);
      EXPECT_LE(rs[i].offset + rs[i].bytes, p.total);
      for (size_t j = 0; j < i; ++j)
        if (rs[i].bytes && rs[j].bytes && !may_share(rs[i], rs[j]))
          EXPECT_TRUE(rs[i].offset >= rs[j].offset + rs[j].bytes || rs[j].offset >= rs[i].offset + rs[i].bytes)
              << "regions " << j << " and " << i << " overlap";
    }
    if (T > 0) {
      EXPECT_LT(p.down.offset, p.up.offset + p.up.bytes);  // the reuse is there
      // Smaller than every region apart (at the model's shapes by nearly half).
      size_t apart = 0;
      for (const MoeRegion& r : rs) apart += (r.bytes + kMoeAlign - 1) / kMoeAlign * kMoeAlign;
      EXPECT_LT(p.total, apart);
    }
  }
}

TEST(CudaMoePlan, RejectsShapesTheKernelsDoNotTake) {
  EXPECT_THROW(plan_moe(dims(1, 64, 32, 0, 1025, 8)), std::invalid_argument);  // the scan's table
  EXPECT_THROW(plan_moe(dims(1, 64, 32, 0, 0, 1)), std::invalid_argument);
  EXPECT_THROW(plan_moe(dims(1, 64, 32, 0, 8, 9)), std::invalid_argument);
  EXPECT_THROW(plan_moe(dims(1, 64, 32, 0, 8, 0)), std::invalid_argument);
  EXPECT_THROW(plan_moe(dims(1, 0, 32, 0, 8, 2)), std::invalid_argument);
  EXPECT_THROW(plan_moe(dims(-1, 64, 32, 0, 8, 2)), std::invalid_argument);
  EXPECT_THROW(plan_moe(dims(int64_t{1} << 29, 64, 32, 0, 8, 8)), std::invalid_argument);  // T * k past int32
  EXPECT_NO_THROW(plan_moe(dims(1, 64, 32, 0, 1024, 1024)));
}

TEST(CudaMoePlan, RouteGridCoversEveryToken) {
  EXPECT_EQ(moe_route_blocks(1), 1);
  EXPECT_EQ(moe_route_blocks(kMoeRouteWarps), 1);
  EXPECT_EQ(moe_route_blocks(kMoeRouteWarps + 1), 2);
  EXPECT_EQ(moe_route_blocks(8192), 8192 / kMoeRouteWarps);
}

// ---- weights ------------------------------------------------------------------------------------

WeightView shape(int64_t n, int64_t k) {
  WeightView w;
  w.n = n;
  w.k = k;
  return w;
}

MoeWeights shapes(int64_t E, int64_t H, int64_t I, int64_t Is, int k) {
  MoeWeights w;
  w.router = shape(E, H);
  for (int64_t e = 0; e < E; ++e) w.experts.push_back({shape(I, H), shape(I, H), shape(H, I)});
  w.shared = {shape(Is, H), shape(Is, H), shape(H, Is)};
  w.shared_gate = shape(1, H);
  w.top_k = k;
  return w;
}

TEST(CudaMoePlan, DimsFromWeightsWithTheCpuChecks) {
  const MoeDims d = moe_dims(shapes(256, 2048, 512, 512, 8));
  EXPECT_EQ(d.tokens, 0);
  EXPECT_EQ(d.hidden, 2048);
  EXPECT_EQ(d.intermediate, 512);
  EXPECT_EQ(d.shared_intermediate, 512);
  EXPECT_EQ(d.experts, 256);
  EXPECT_EQ(d.top_k, 8);
  MoeWeights no_shared = shapes(8, 64, 32, 48, 2);
  no_shared.has_shared = false;
  EXPECT_EQ(moe_dims(no_shared).shared_intermediate, 0);

  auto throws = [](const MoeWeights& w, const char* what) {
    try {
      moe_dims(w);
      ADD_FAILURE() << "no error for " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("moe"), std::string::npos) << e.what();
    }
  };
  MoeWeights w = shapes(8, 64, 32, 48, 2);
  w.router.n = 7;
  throws(w, "router rows");
  w = shapes(8, 64, 32, 48, 9);
  throws(w, "top_k > E");
  w = shapes(8, 64, 32, 48, 2);
  w.experts[3].down.n = 63;
  throws(w, "expert down");
  w = shapes(8, 64, 32, 48, 2);
  w.experts[5] = {shape(16, 64), shape(16, 64), shape(64, 16)};
  throws(w, "another intermediate size");
  w = shapes(8, 64, 32, 48, 2);
  w.shared_gate.n = 2;
  throws(w, "shared gate");
  w = shapes(8, 64, 32, 48, 2);
  w.shared.up.n = 40;
  throws(w, "shared up");
  throws(shapes(1100, 64, 32, 48, 2), "too many experts");
}

// ---- the block, replayed ------------------------------------------------------------------------

struct TestMoe {
  std::deque<test::RandomWeight> parts;
  MoeWeights w;
  std::vector<uint16_t> x;
};

// bf16 experts; few: every token routed among the first k + 1 experts (tokens share experts).
TestMoe make(int64_t T, int64_t E, int64_t H, int64_t I, int64_t Is, int k, bool few, uint32_t seed) {
  TestMoe m;
  auto weight = [&](int64_t n, int64_t kk) -> WeightView {
    m.parts.push_back(test::make_random_weight(test::WeightKind::kBf16, n, kk, seed + static_cast<uint32_t>(m.parts.size()) * 7));
    return m.parts.back().view;
  };
  m.w.router = weight(E, H);
  if (few) {
    uint16_t* r = m.parts.back().u16.data();
    for (int64_t e = 0; e < E; ++e) r[e * H] = f32_to_bf16_bits(e <= k ? 1.0f : -1.0f);
  }
  for (int64_t e = 0; e < E; ++e) m.w.experts.push_back({weight(I, H), weight(I, H), weight(H, I)});
  m.w.has_shared = Is > 0;
  if (Is > 0) {
    m.w.shared = {weight(Is, H), weight(Is, H), weight(H, Is)};
    m.w.shared_gate = weight(1, H);
  }
  m.w.top_k = k;
  std::vector<float> xv = test::random_f32(static_cast<size_t>(T * H), seed + 1);
  if (few)
    for (int64_t t = 0; t < T; ++t) xv[t * H] = 40.0f;
  m.x = test::to_bf16(xv);
  return m;
}

// moe_cuda.cu's moe(), stage by stage, on one host buffer laid out by plan_moe.
std::vector<uint16_t> replay(const MoeWeights& w, const std::vector<uint16_t>& x, int64_t T) {
  MoeDims d = moe_dims(w);
  d.tokens = T;
  const MoePlan p = plan_moe(d);
  const int64_t H = d.hidden, I = d.intermediate, Is = d.shared_intermediate, R = p.pairs;
  const int E = static_cast<int>(d.experts), k = static_cast<int>(d.top_k);
  std::vector<std::byte> scratch(p.total, std::byte{0xA5});  // poisoned
  auto at = [&](const MoeRegion& r) { return static_cast<void*>(scratch.data() + r.offset); };
  auto f32 = [&](const MoeRegion& r) { return static_cast<float*>(at(r)); };
  auto i32 = [&](const MoeRegion& r) { return static_cast<int32_t*>(at(r)); };
  auto bf16 = [&](const MoeRegion& r) { return static_cast<uint16_t*>(at(r)); };
  // An expert-grouped linear: rows [offsets[e], offsets[e+1]) through expert e's weight.
  auto grouped = [&](const uint16_t* xs, int64_t K, auto pick, float* y, int64_t N) {
    for (int e = 0; e < E; ++e) {
      const int32_t r0 = i32(p.offsets)[e], n = i32(p.offsets)[e + 1] - r0;
      if (n > 0) linear_bf16(xs + r0 * K, n, pick(w.experts[static_cast<size_t>(e)]), y + r0 * N);
    }
  };

  linear_bf16(x.data(), T, w.router, f32(p.logits));  // one linears() call with the shared three
  if (w.has_shared) {
    linear_bf16(x.data(), T, w.shared.gate, f32(p.s_gate));
    linear_bf16(x.data(), T, w.shared.up, f32(p.s_up));
    linear_bf16(x.data(), T, w.shared_gate, f32(p.s_score));
  }
  for (int64_t t = 0; t < T; ++t)
    sim::route_as_warp(f32(p.logits) + t * E, E, k, i32(p.idx) + t * k, f32(p.weight) + t * k);
  const std::vector<int32_t> idx(i32(p.idx), i32(p.idx) + R);
  const sim::Sorted s = sim::sort_as_kernels(idx, E, k);
  std::copy(s.offsets.begin(), s.offsets.end(), i32(p.offsets));
  std::copy(s.row_token.begin(), s.row_token.end(), i32(p.row_token));
  std::copy(s.row_of.begin(), s.row_of.end(), i32(p.row_of));
  for (int64_t r = 0; r < R; ++r) std::copy_n(x.data() + i32(p.row_token)[r] * H, H, bf16(p.x_sorted) + r * H);

  grouped(bf16(p.x_sorted), H, [](const ExpertWeights& e) { return e.gate; }, f32(p.gate), I);
  grouped(bf16(p.x_sorted), H, [](const ExpertWeights& e) { return e.up; }, f32(p.up), I);
  for (int64_t i = 0; i < R * I; ++i) bf16(p.act)[i] = moe::bf16_bits(moe::swiglu(f32(p.gate)[i], f32(p.up)[i]));
  if (w.has_shared)  // the same launch
    for (int64_t i = 0; i < T * Is; ++i) bf16(p.s_act)[i] = moe::bf16_bits(moe::swiglu(f32(p.s_gate)[i], f32(p.s_up)[i]));
  grouped(bf16(p.act), I, [](const ExpertWeights& e) { return e.down; }, f32(p.down), H);
  if (w.has_shared) linear_bf16(bf16(p.s_act), T, w.shared.down, f32(p.s_down));

  // moe_combine_kernel: thread 0's order, then every column.
  std::vector<uint16_t> out(static_cast<size_t>(T * H));
  std::vector<int32_t> order(static_cast<size_t>(k));
  for (int64_t t = 0; t < T; ++t) {
    moe::combine_order(i32(p.idx) + t * k, k, order.data());
    const float gate = w.has_shared ? moe::shared_gate(f32(p.s_score)[t]) : 0.0f;
    for (int64_t h = 0; h < H; ++h) {
      float acc = 0.0f;
      for (int j = 0; j < k; ++j) {
        const int64_t pair = t * k + order[static_cast<size_t>(j)];
        acc = moe::add_routed(acc, f32(p.down)[static_cast<int64_t>(i32(p.row_of)[pair]) * H + h], f32(p.weight)[pair]);
      }
      if (w.has_shared) acc = moe::add_shared(acc, gate, f32(p.s_down)[t * H + h]);
      out[static_cast<size_t>(t * H + h)] = moe::bf16_bits(acc);
    }
  }
  return out;
}

TEST(CudaMoeBlock, ReplayedPipelineEqualsTheCpuBlockBitForBit) {
  struct Case {
    int64_t T, E, H, I, Is;
    int k;
    bool few;
  };
  // The model's E = 256, k = 8 (H, I reduced to keep it fast) at T = 1, 8, 64 (pairs across the sort's
  // 256-pair chunks), skewed routing, no shared expert, and odd sizes.
  for (const Case c : {Case{1, 256, 64, 16, 32, 8, false}, Case{8, 256, 64, 16, 32, 8, false},
                       Case{64, 256, 64, 16, 32, 8, false}, Case{64, 256, 64, 16, 32, 8, true},
                       Case{19, 8, 40, 24, 0, 4, false}, Case{7, 40, 72, 8, 24, 3, true}}) {
    SCOPED_TRACE(testing::Message() << "T=" << c.T << " E=" << c.E << " k=" << c.k << (c.few ? " few" : ""));
    const TestMoe m = make(c.T, c.E, c.H, c.I, c.Is, c.k, c.few, static_cast<uint32_t>(c.T * 131 + c.E));
    std::vector<uint16_t> want(static_cast<size_t>(c.T * c.H));
    moe_block(m.x.data(), c.T, m.w, want.data());
    const std::vector<uint16_t> got = replay(m.w, m.x, c.T);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << "of " << got.size() << " outputs";
  }
}

}  // namespace
}  // namespace fp4serve::kernels::cuda

#endif  // FP4SERVE_HAVE_CUDA
