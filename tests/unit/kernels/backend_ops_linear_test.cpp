// The backend op harness (backend_ops_harness.h) on linears (every checkpoint weight format, M on
// both sides of the kernels' tile switches, N and K off every block size) and the MoE block (top-k,
// shared expert on and off, tokens routed to few or to many experts), plus their batch invariance
// on every backend: a row computed in a batch is bit-identical to the row computed alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>

#include "backend_ops_harness.h"
#include "kernel_test_util.h"

namespace fp4serve::kernels::test::ops {
namespace {

using Kind = WeightKind;

// The formats a checkpoint hands prepare_linear (int4 arrives as GPTQ; the backend repacks it).
const Kind kFormats[] = {Kind::kBf16,         Kind::kFp8Tensor, Kind::kFp8BlockF32,
                         Kind::kFp8BlockBf16, Kind::kNvfp4,     Kind::kInt4Gptq};

// N off the 16-row panels and 4/8-row tiles; K off the 32-lane dot, the 64/128/256 k blocks, and
// one longer K; each format's K constraint (NVFP4 % 16, INT4 % 128) respected.
std::vector<std::pair<int64_t, int64_t>> shapes_for(Kind f) {
  if (f == Kind::kNvfp4) return {{13, 272}, {37, 80}, {67, 1024}};
  if (f == Kind::kInt4Gptq) return {{13, 384}, {37, 128}, {67, 1024}};
  return {{13, 100}, {37, 300}, {67, 1024}};
}

// y = x @ W^T for one weight: x [M, K] bf16 random, W from `seed`.
Output run_linear(Backend& b, Kind f, int64_t M, int64_t N, int64_t K, uint32_t seed, uint32_t x_seed) {
  RandomWeight w = make_random_weight(f, N, K, seed);
  const LinearHandle lh = b.prepare_linear(w.view);
  DeviceTensor x = upload(b, DType::kBF16, {M, K}, to_bf16(random_f32(M * K, x_seed)), "x");
  DeviceTensor y = alloc(b, DType::kF32, {M, N}, "y");
  const LinearOut o{lh, y.view};
  b.linears(x.view, {&o, 1});
  return download(b, y.view, "y");
}

TEST(BackendOps, LinearsEveryFormat) {
  Harness h;
  for (Kind f : kFormats)
    for (auto [N, K] : shapes_for(f))
      for (int64_t M : {1, 2, 4, 6, 9, 16, 17, 40}) {  // each side of the M <= 4 / 8 / 16 kernel paths
        h.check({"linears", cat(kind_name(f), " M=", M, " N=", N, " K=", K), OpClass::kMatmul, kNmseMatmul,
                 [=](Backend& b, uint32_t seed) {
                   return std::vector<Output>{run_linear(b, f, M, N, K, seed, seed + 7)};
                 }});
      }
}

// The model's K (hidden 2048: 16 K steps of the CUDA kernel, all of a block's warps busy) with M on
// each side of the GPU's 16-row mma tile and over several tiles; N off the 16-column block.
TEST(BackendOps, LinearsModelK) {
  Harness h;
  for (Kind f : kFormats)
    for (int64_t M : {1, 8, 64, 256})
      h.check({"linears", cat(kind_name(f), " M=", M, " N=24 K=2048"), OpClass::kMatmul, kNmseMatmul,
               [=](Backend& b, uint32_t seed) { return std::vector<Output>{run_linear(b, f, M, 24, 2048, seed, seed + 7)}; }});
}

// Three weights of different formats sharing one input (like q/k/v), written into column ranges of
// one wider output (row-strided output views): each part equals that linear alone, and nothing
// outside the ranges is written.
struct MultiLinear {
  static constexpr int64_t K = 256, Ns[3] = {20, 13, 9}, kWidth = 20 + 13 + 9 + 6;
  static constexpr Kind kinds[3] = {Kind::kBf16, Kind::kNvfp4, Kind::kInt4Gptq};
  std::deque<RandomWeight> weights;
  LinearOut outs[3];
  int64_t c0[3];  // first output column of each part
  DeviceTensor y;
  MultiLinear(Backend& b, int64_t M, uint32_t seed) {
    y = alloc(b, DType::kF32, {M, kWidth}, "y");
    for (int i = 0; i < 3; ++i) {
      c0[i] = i == 0 ? 2 : c0[i - 1] + Ns[i - 1] + 1;
      weights.push_back(make_random_weight(kinds[i], Ns[i], K, seed + static_cast<uint32_t>(i)));
      outs[i] = {b.prepare_linear(weights.back().view), columns_of(y.view, c0[i], Ns[i])};
    }
  }
};

TEST(BackendOps, LinearsSeveralOutputsInOneCall) {
  Harness h;
  for (int64_t M : {1, 6}) {
    h.check({"linears", cat("bf16+nvfp4+int4_gptq into strided outputs M=", M), OpClass::kMatmul, kNmseMatmul,
             [=](Backend& b, uint32_t seed) {
               MultiLinear ml(b, M, seed);
               DeviceTensor x = upload(b, DType::kBF16, {M, ml.K}, to_bf16(random_f32(M * ml.K, seed + 9)), "x");
               b.linears(x.view, ml.outs);
               return std::vector<Output>{download(b, ml.y.view, "y")};
             }});
  }
  // Each part as its own call gives the same bits, on every backend.
  for (Harness::Column& col : h.columns()) {
    Backend& b = *col.backend;
    const int64_t M = 5;
    MultiLinear ml(b, M, 77);
    DeviceTensor x = upload(b, DType::kBF16, {M, ml.K}, to_bf16(random_f32(M * ml.K, 78)), "x");
    b.linears(x.view, ml.outs);
    const Output together = download(b, ml.y.view, "together");
    DeviceTensor y2 = alloc(b, DType::kF32, {M, ml.kWidth}, "y alone");
    for (int i = 0; i < 3; ++i) {
      const LinearOut alone{ml.outs[i].w, columns_of(y2.view, ml.c0[i], ml.Ns[i])};
      b.linears(x.view, {&alone, 1});
    }
    const Output separate = download(b, y2.view, "separate");
    same_bytes(together, 0, separate, 0, together.bytes.size(), col.spec.name + ": linears together vs one by one");
  }
}

TEST(BackendOps, LinearsBatchInvariance) {
  Harness h;
  const int64_t M = 21;
  for (Harness::Column& col : h.columns())
    for (Kind f : kFormats) {
      const auto [N, K] = shapes_for(f)[1];
      const std::string what = cat(col.spec.name, " ", kind_name(f), " N=", N, " K=", K);
      Backend& b = *col.backend;
      const uint32_t wseed = 500, xseed = 501;
      const Output batch = run_linear(b, f, M, N, K, wseed, xseed);
      // The same rows alone and as sub-batches on both sides of the M <= 4 register path.
      RandomWeight w = make_random_weight(f, N, K, wseed);
      const LinearHandle lh = b.prepare_linear(w.view);
      const auto x = to_bf16(random_f32(M * K, xseed));
      for (auto [m0, mm] : {std::pair<int64_t, int64_t>{0, 1}, {7, 1}, {20, 1}, {3, 4}, {10, 5}, {2, 17}}) {
        const std::vector<uint16_t> part(x.begin() + m0 * K, x.begin() + (m0 + mm) * K);
        DeviceTensor xd = upload(b, DType::kBF16, {mm, K}, part, "x rows");
        DeviceTensor y = alloc(b, DType::kF32, {mm, N}, "y");
        const LinearOut o{lh, y.view};
        b.linears(xd.view, {&o, 1});
        const Output got = download(b, y.view, "y");
        if (!same_bytes(batch, static_cast<std::size_t>(m0 * N * 4), got, 0, got.bytes.size(),
                        cat(what, ": rows ", m0, "..", m0 + mm - 1, " alone vs in a batch of ", M)))
          return;
      }
    }
}

// The same at the model's K in a batch of 64 (four of the GPU's 16-row tiles): rows alone, and a
// sub-batch that starts inside a tile, are the batch's rows bit for bit.
TEST(BackendOps, LinearsBatchInvarianceModelK) {
  Harness h;
  const int64_t M = 64, N = 24, K = 2048;
  for (Harness::Column& col : h.columns())
    for (Kind f : kFormats) {
      Backend& b = *col.backend;
      const Output batch = run_linear(b, f, M, N, K, 600, 601);
      RandomWeight w = make_random_weight(f, N, K, 600);
      const LinearHandle lh = b.prepare_linear(w.view);
      const auto x = to_bf16(random_f32(M * K, 601));
      for (auto [m0, mm] : {std::pair<int64_t, int64_t>{0, 1}, {17, 1}, {63, 1}, {9, 40}}) {
        const std::vector<uint16_t> part(x.begin() + m0 * K, x.begin() + (m0 + mm) * K);
        DeviceTensor xd = upload(b, DType::kBF16, {mm, K}, part, "x rows");
        DeviceTensor y = alloc(b, DType::kF32, {mm, N}, "y");
        const LinearOut o{lh, y.view};
        b.linears(xd.view, {&o, 1});
        const Output got = download(b, y.view, "y");
        if (!same_bytes(batch, static_cast<std::size_t>(m0 * N * 4), got, 0, got.bytes.size(),
                        cat(col.spec.name, " ", kind_name(f), " K=", K, ": rows ", m0, "..", m0 + mm - 1,
                            " alone vs in a batch of ", M)))
          return;
      }
    }
}

// ---- MoE ----------------------------------------------------------------------------------------

struct MoeShape {
  Kind kind;
  int64_t T;
  int top_k;
  bool shared;
  bool few;  // route every token to the same top_k + 1 experts (else: spread over all)
  int64_t E = 8;
  int64_t H = 0, I = 0;  // 0: the format's default (hidden 64 or 128, intermediate 32 or 128)
};

std::string describe(const MoeShape& s) {
  return cat(kind_name(s.kind), " T=", s.T, " E=", s.E, " top_k=", s.top_k, s.H ? cat(" H=", s.H, " I=", s.I) : "",
             s.shared ? " shared" : " no-shared", s.few ? " few-experts" : " many-experts");
}

// E experts of one format (the router and shared gate bf16, as in the checkpoints).
struct HostMoe {
  int64_t E, H, I, Is;
  std::deque<RandomWeight> parts;
  std::vector<uint16_t> router;
  MoeWeights w;
  std::vector<uint16_t> x;  // [T, H] input rows
};

// few: column 0 of x is +4 and the router's column 0 is +1 for experts 0 .. top_k and -1 for the
// rest, so those top_k + 1 experts win every token (by ~8 logits against noise of ~0.4).
HostMoe make_moe(const MoeShape& s, uint32_t seed) {
  HostMoe m;
  const bool int4 = s.kind == Kind::kInt4Gptq;
  m.E = s.E;
  m.H = s.H ? s.H : int4 ? 128 : 64;
  m.I = s.I ? s.I : int4 ? 128 : 32;
  m.Is = s.H ? 2 * m.I : int4 ? 128 : 48;
  auto weight = [&](int64_t n, int64_t k) -> const WeightView& {
    m.parts.push_back(make_random_weight(s.kind, n, k, seed + static_cast<uint32_t>(m.parts.size()) * 7 + 3));
    return m.parts.back().view;
  };
  for (int64_t e = 0; e < m.E; ++e) {
    ExpertWeights ex;
    ex.gate = weight(m.I, m.H);
    ex.up = weight(m.I, m.H);
    ex.down = weight(m.H, m.I);
    m.w.experts.push_back(ex);
  }
  m.router = to_bf16(random_f32(m.E * m.H, seed + 1, s.few ? 0.05f : 0.3f));
  auto xv = random_f32(s.T * m.H, seed + 2);
  if (s.few) {
    for (int64_t e = 0; e < m.E; ++e) m.router[e * m.H] = f32_to_bf16_bits(e <= s.top_k ? 1.0f : -1.0f);
    for (int64_t t = 0; t < s.T; ++t) xv[t * m.H] = 4.0f;
  }
  m.x = to_bf16(xv);
  m.w.router = bf16_weight(m.router.data(), m.E, m.H);
  m.w.top_k = s.top_k;
  m.w.has_shared = s.shared;
  if (s.shared) {
    m.w.shared.gate = weight(m.Is, m.H);
    m.w.shared.up = weight(m.Is, m.H);
    m.w.shared.down = weight(m.H, m.Is);
    m.parts.push_back(make_random_weight(Kind::kBf16, 1, m.H, seed + 5));
    m.w.shared_gate = m.parts.back().view;
  }
  return m;
}

// How many distinct experts the case's tokens route to (router logits in double, top-k by value):
// the cases check that "few" and "many" are what they say.
int experts_hit(const HostMoe& m, int64_t T, int top_k) {
  std::vector<bool> hit(m.E);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<std::pair<double, int64_t>> logits;
    for (int64_t e = 0; e < m.E; ++e) {
      double l = 0;
      for (int64_t k = 0; k < m.H; ++k)
        l += double(bf16_bits_to_f32(m.x[t * m.H + k])) * bf16_bits_to_f32(m.router[e * m.H + k]);
      logits.push_back({-l, e});
    }
    std::sort(logits.begin(), logits.end());
    for (int i = 0; i < top_k; ++i) hit[logits[i].second] = true;
  }
  return static_cast<int>(std::count(hit.begin(), hit.end(), true));
}

// The block on rows [t0, t0 + n) of the case's input.
Output run_moe(Backend& b, const HostMoe& m, const MoeHandle& mh, int64_t t0, int64_t n) {
  const std::vector<uint16_t> rows(m.x.begin() + t0 * m.H, m.x.begin() + (t0 + n) * m.H);
  DeviceTensor x = upload(b, DType::kBF16, {n, m.H}, rows, "x");
  DeviceTensor out = alloc(b, DType::kBF16, {n, m.H}, "out");
  b.moe(x.view, mh, out.view);
  return download(b, out.view, "out");
}

const MoeShape kMoeShapes[] = {
    {Kind::kBf16, 1, 4, true, false},         {Kind::kBf16, 6, 2, false, true},
    {Kind::kBf16, 19, 4, true, true},         {Kind::kNvfp4, 1, 2, true, false},
    {Kind::kNvfp4, 6, 4, true, true},         {Kind::kNvfp4, 19, 4, false, false},
    {Kind::kFp8BlockBf16, 7, 3, true, false}, {Kind::kFp8BlockBf16, 19, 2, true, true},
    {Kind::kInt4Gptq, 1, 4, true, true},      {Kind::kInt4Gptq, 9, 2, true, false},
    // The model's routing (E = 256, top_k = 8) at the GPU's decode and prefill batch sizes; hidden
    // and intermediate cut from 2048 and 512 to 512 and 32: the real sizes cost the CPU columns
    // seconds per case (weights for 256 experts, five tiers). The GPU kernels' loops over H and
    // their sort chunks (256 pairs) are crossed all the same.
    {Kind::kNvfp4, 1, 8, true, false, 256, 512, 32},
    {Kind::kNvfp4, 8, 8, true, false, 256, 512, 32},
    {Kind::kNvfp4, 64, 8, true, false, 256, 512, 32},
    {Kind::kBf16, 64, 8, true, true, 256, 64, 16},
};

TEST(BackendOps, Moe) {
  Harness h;
  for (const MoeShape& s : kMoeShapes) {
    h.check({"moe", describe(s), OpClass::kMatmul, kNmseMatmul, [=](Backend& b, uint32_t seed) {
               const HostMoe m = make_moe(s, seed);
               const int hit = experts_hit(m, s.T, s.top_k);
               if (s.few ? hit > s.top_k + 1 : s.T > 1 && hit <= s.top_k + 1)
                 throw std::logic_error(cat("the case routes its tokens to ", hit, " experts"));
               return std::vector<Output>{run_moe(b, m, b.prepare_moe(m.w), 0, s.T)};
             }});
  }
}

// What moe() and prepare_moe() reject on every backend, before touching memory.
TEST(BackendOps, MoeBadArgumentsThrowOnEveryBackend) {
  Harness h;
  for (Harness::Column& col : h.columns()) {
    SCOPED_TRACE(col.spec.name);
    Backend& b = *col.backend;
    const HostMoe m = make_moe({Kind::kBf16, 3, 2, true, false}, 5);
    const MoeHandle mh = b.prepare_moe(m.w);
    DeviceTensor x = alloc(b, DType::kBF16, {3, m.H}, "x");
    DeviceTensor narrow = alloc(b, DType::kBF16, {3, m.H - 8}, "x of another hidden size");
    DeviceTensor f32 = alloc(b, DType::kF32, {3, m.H}, "f32 out");
    DeviceTensor short_out = alloc(b, DType::kBF16, {2, m.H}, "out with a row missing");
    EXPECT_THROW(b.moe(narrow.view, mh, x.view), std::invalid_argument);
    EXPECT_THROW(b.moe(x.view, mh, f32.view), std::invalid_argument);
    EXPECT_THROW(b.moe(x.view, mh, short_out.view), std::invalid_argument);
    // A block whose router has a row per expert missing: at prepare on the CUDA backend, at the
    // first call on the CPU one (it checks the weights there).
    MoeWeights bad = m.w;
    bad.router.n = m.E - 1;
    DeviceTensor out = alloc(b, DType::kBF16, {3, m.H}, "out");
    EXPECT_THROW(b.moe(x.view, b.prepare_moe(bad), out.view), std::invalid_argument);
  }
}

TEST(BackendOps, MoeBatchInvariance) {
  Harness h;
  for (Harness::Column& col : h.columns())
    for (const MoeShape& s : {MoeShape{Kind::kNvfp4, 19, 4, true, false}, MoeShape{Kind::kBf16, 19, 4, true, true},
                              MoeShape{Kind::kInt4Gptq, 9, 2, false, false},
                              MoeShape{Kind::kNvfp4, 40, 8, true, false, 256, 256, 32}}) {
      Backend& b = *col.backend;
      const HostMoe m = make_moe(s, 900);
      const MoeHandle mh = b.prepare_moe(m.w);
      const Output batch = run_moe(b, m, mh, 0, s.T);
      const std::size_t row = static_cast<std::size_t>(m.H) * 2;
      for (auto [t0, n] : {std::pair<int64_t, int64_t>{0, 1}, {5, 1}, {s.T - 1, 1}, {2, 6}}) {
        const Output part = run_moe(b, m, mh, t0, n);
        if (!same_bytes(
                batch, t0 * row, part, 0, part.bytes.size(),
                cat(col.spec.name, " moe ", describe(s), ": tokens ", t0, "..", t0 + n - 1, " alone vs in the batch")))
          return;
      }
    }
}

}  // namespace
}  // namespace fp4serve::kernels::test::ops
