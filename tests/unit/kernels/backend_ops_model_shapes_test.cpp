// The backend op harness (backend_ops_harness.h) on the row-wise ops at the model's real shapes
// (hidden 2048, head_dim 256 with rotary 64, GDN's 32 value heads of 128, M-RoPE with distinct
// t/h/w positions, the vision tower's widths), for T in {1, 7, 64} tokens; the vision tower's ops
// (layernorm, bias_activation, rope_table); batch invariance of the row-wise ops (a row alone gives
// the bytes it gives in a batch of 64); and their argument checks on every backend.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "backend_ops_harness.h"
#include "kernel_test_util.h"

namespace fp4serve::kernels::test::ops {
namespace {

constexpr int64_t kHidden = 2048, kVisionHidden = 1152, kVisionMlp = 4304;
constexpr int64_t kTokens[] = {1, 7, 64};

// M-RoPE positions [3, T]: text positions from pos0 on, h and w near them but distinct.
std::vector<int64_t> mrope_positions(int64_t T, int64_t pos0, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> p(3 * T);
  for (int64_t t = 0; t < T; ++t) {
    p[t] = pos0 + t;
    p[T + t] = pos0 + static_cast<int64_t>(rng() % 48);
    p[2 * T + t] = pos0 + static_cast<int64_t>(rng() % 48) + 1;
  }
  return p;
}

TEST(BackendOpsModelShapes, Norms) {
  Harness h;
  for (int64_t T : kTokens) {
    // The layers' input/post-attention norms [T, 2048], q/k norms over heads [T * 16, 256], and rows
    // wider than a CUDA warp stages in shared memory.
    for (auto [R, D] : {std::pair<int64_t, int64_t>{T, kHidden}, {T * 16, 256}, {T, 2 * kHidden + 8}})
      h.check({"rmsnorm", cat("R=", R, " D=", D), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
                 const auto w = random_bf16_values(D, seed + 1, 0.5f);
                 DeviceTensor x = upload(b, DType::kBF16, {R, D}, to_bf16(random_f32(R * D, seed, 3.0f)), "x");
                 DeviceTensor out = alloc(b, DType::kBF16, {R, D}, "out");
                 b.rmsnorm(x.view, prepared(b, DType::kF32, {D}, w.data()), 1e-6f, NormKind::kOnePlus, out.view);
                 return std::vector<Output>{download(b, out.view, "out")};
               }});
    // GDN's gated norm over its 32 value heads of 128.
    const int64_t R = T * 32, D = 128;
    h.check({"rmsnorm_gated", cat("R=", R, " D=", D), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               const auto w = random_bf16_values(D, seed + 2, 0.5f);
               DeviceTensor x = upload(b, DType::kBF16, {R, D}, to_bf16(random_f32(R * D, seed, 2.0f)), "x");
               DeviceTensor z = upload(b, DType::kBF16, {R, D}, to_bf16(random_f32(R * D, seed + 1, 3.0f)), "z");
               DeviceTensor out = alloc(b, DType::kBF16, {R, D}, "out");
               b.rmsnorm_gated(x.view, z.view, prepared(b, DType::kF32, {D}, w.data()), 1e-6f, out.view);
               return std::vector<Output>{download(b, out.view, "out")};
             }});
  }
}

TEST(BackendOpsModelShapes, RopeTextAndMRope) {
  Harness h;
  const RopeConfig cfg;  // head_dim 256, rotary 64, theta 1e7, sections (11, 11, 10)
  for (int64_t T : kTokens)
    for (int64_t heads : {16, 2})      // q and k of full attention
      for (int64_t pos0 : {0, 150000})  // a fresh prompt and a long context
        for (bool mrope : {false, true})
          h.check({"rope", cat(mrope ? "M-RoPE" : "text", " T=", T, " heads=", heads, " pos0=", pos0), OpClass::kMath,
                   kNmseExactMath, [=](Backend& b, uint32_t seed) {
                     const int64_t D = cfg.head_dim;
                     DeviceTensor x = upload(b, DType::kBF16, {T, heads, D},
                                             to_bf16(random_f32(T * heads * D, seed, 2.0f)), "x");
                     if (mrope) {
                       DeviceTensor p = upload(b, DType::kI64, {3, T}, mrope_positions(T, pos0, seed + 1), "positions");
                       b.rope(x.view, p.view, cfg);
                     } else {
                       std::vector<int64_t> pos(T);
                       for (int64_t t = 0; t < T; ++t) pos[t] = pos0 + t;
                       DeviceTensor p = upload(b, DType::kI64, {T}, pos, "positions");
                       b.rope(x.view, p.view, cfg);
                     }
                     return std::vector<Output>{download(b, x.view, "x")};
                   }});
}

TEST(BackendOpsModelShapes, EmbeddingResidualAndConversions) {
  Harness h;
  const int64_t V = 64;
  for (int64_t T : kTokens) {
    h.check({"embedding", cat("V=", V, " H=", kHidden, " T=", T), OpClass::kMove, kNmseMove,
             [=](Backend& b, uint32_t seed) {
               const auto table = to_bf16(random_f32(V * kHidden, seed));
               std::mt19937 rng(seed + 1);
               std::vector<int32_t> ids(T);
               for (auto& id : ids) id = static_cast<int32_t>(rng() % V);
               ids.back() = static_cast<int32_t>(V - 1);
               DeviceTensor idv = upload(b, DType::kI32, {T}, ids, "ids");
               DeviceTensor out = alloc(b, DType::kBF16, {T, kHidden}, "out");
               b.embedding(prepared(b, DType::kBF16, {V, kHidden}, table.data()), idv.view, out.view);
               return std::vector<Output>{download(b, out.view, "out")};
             }});
    h.check({"residual_add", cat("R=", T, " H=", kHidden), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               DeviceTensor x = upload(b, DType::kBF16, {T, kHidden}, to_bf16(random_f32(T * kHidden, seed, 4.0f)), "x");
               DeviceTensor y = upload(b, DType::kBF16, {T, kHidden}, to_bf16(random_f32(T * kHidden, seed + 1)), "y");
               b.residual_add(x.view, y.view);
               return std::vector<Output>{download(b, x.view, "x")};
             }});
    // Widths of 8k + 3 elements: the vector body and the scalar tail.
    const int64_t C = kHidden + 3;
    h.check({"to_bf16", cat("R=", T, " C=", C), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               DeviceTensor x = upload(b, DType::kF32, {T, C}, random_f32(T * C, seed, 3.0f), "x");
               DeviceTensor out = alloc(b, DType::kBF16, {T, C}, "out");
               b.to_bf16(x.view, out.view);
               return std::vector<Output>{download(b, out.view, "out")};
             }});
    h.check({"round_bf16", cat("R=", T, " C=", C), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               DeviceTensor x = upload(b, DType::kF32, {T, C}, random_f32(T * C, seed, 3.0f), "x");
               b.round_bf16(x.view);
               return std::vector<Output>{download(b, x.view, "x")};
             }});
  }
}

TEST(BackendOpsModelShapes, GatherRows) {
  // The last row of each sequence for the logits: from the hidden states, and from a wider buffer.
  Harness h;
  for (bool strided : {false, true})
    h.check({"gather_rows", cat("H=", kHidden, strided ? " x row-strided" : ""), OpClass::kMove, kNmseMove,
             [=](Backend& b, uint32_t seed) {
               const int64_t R = 64, W = strided ? kHidden + 5 : kHidden;  // rows 16-byte aligned or not
               DeviceTensor xs = upload(b, DType::kBF16, {R, W}, to_bf16(random_f32(R * W, seed)), "x");
               const std::vector<int64_t> rows = {6, 0, 63, 31, 31};
               DeviceTensor out = alloc(b, DType::kBF16, {static_cast<int64_t>(rows.size()), kHidden}, "out");
               b.gather_rows(columns_of(xs.view, strided ? 3 : 0, kHidden), rows, out.view);
               return std::vector<Output>{download(b, out.view, "out")};
             }});
}

TEST(BackendOpsModelShapes, StateCopyAndZeroAtTheModelsDims) {
  Harness h;
  const GdnDims d;  // Hk 16, Hv 32, dk 128, dv 128, conv kernel 4: 2 MiB of recurrent state per layer
  const int64_t layers = 1, cs = d.conv_state_elems(), ss = d.state_elems();
  auto run = [=](Backend& b, uint32_t seed, bool zero) {
    // Distinct values in every element, cheaply (megabytes of them).
    std::vector<float> sv(2 * layers * ss);
    for (std::size_t i = 0; i < sv.size(); ++i) sv[i] = static_cast<float>((i * 2654435761u + seed) % 100003) - 5e4f;
    DeviceTensor conv = upload(b, DType::kBF16, {2 * layers, cs}, to_bf16(random_f32(2 * layers * cs, seed)), "conv");
    DeviceTensor ssm = upload(b, DType::kF32, {2 * layers, ss}, sv, "ssm");
    std::vector<GdnStateRef> e[2];
    for (int i = 0; i < 2; ++i)
      for (int64_t l = 0; l < layers; ++l)
        e[i].push_back({conv.view.as<uint16_t>() + (i * layers + l) * cs, ssm.view.as<float>() + (i * layers + l) * ss});
    if (zero)
      b.state_zero(e[0], d);
    else
      b.state_copy(e[1], e[0], d);
    return std::vector<Output>{download(b, conv.view, "conv"), download(b, ssm.view, "ssm")};
  };
  h.check({"state_copy", "model dims, 1 layer", OpClass::kMove, kNmseMove,
           [=](Backend& b, uint32_t seed) { return run(b, seed, false); }});
  h.check({"state_zero", "model dims, 1 layer", OpClass::kMove, kNmseMove,
           [=](Backend& b, uint32_t seed) { return run(b, seed, true); }});
}

// ---- the vision tower's ops -------------------------------------------------------------------

TEST(BackendOps, LayerNorm) {
  Harness h;
  for (int64_t R : kTokens)
    h.check({"layernorm", cat("R=", R, " D=", kVisionHidden), OpClass::kMath, kNmseExactMath,
             [=](Backend& b, uint32_t seed) {
               const int64_t D = kVisionHidden;
               auto w = random_bf16_values(D, seed + 1, 0.2f);
               for (float& v : w) v = round_bf16(1.0f + v);
               const auto bias = random_bf16_values(D, seed + 2, 0.1f);
               // rows with an offset: the mean matters
               auto x = random_f32(R * D, seed, 2.0f);
               for (float& v : x) v += 0.75f;
               DeviceTensor xd = upload(b, DType::kBF16, {R, D}, to_bf16(x), "x");
               DeviceTensor out = alloc(b, DType::kBF16, {R, D}, "out");
               b.layernorm(xd.view, prepared(b, DType::kF32, {D}, w.data()), prepared(b, DType::kF32, {D}, bias.data()),
                           1e-6f, out.view);
               b.layernorm(xd.view, prepared(b, DType::kF32, {D}, w.data()), prepared(b, DType::kF32, {D}, bias.data()),
                           1e-6f, xd.view);  // in place
               return std::vector<Output>{download(b, out.view, "out"), download(b, xd.view, "in place")};
             }});
}

TEST(BackendOps, BiasActivation) {
  Harness h;
  const char* names[] = {"none", "gelu_tanh", "gelu_erf"};
  for (int64_t R : kTokens)
    for (int64_t N : {kVisionMlp, int64_t{37}})
      for (Activation act : {Activation::kNone, Activation::kGeluTanh, Activation::kGeluErf})
        for (bool with_bias : {true, false}) {
          if (!with_bias && act != Activation::kGeluTanh) continue;
          h.check({"bias_activation", cat("R=", R, " N=", N, " ", names[static_cast<int>(act)], with_bias ? "" : " no bias"),
                   OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
                     const auto bias = random_bf16_values(N, seed + 1, 0.5f);
                     DeviceTensor x = upload(b, DType::kF32, {R, N}, random_f32(R * N, seed, 3.0f), "x");
                     DeviceTensor out = alloc(b, DType::kBF16, {R, N}, "out");
                     TensorView bv;  // data == nullptr: no bias
                     if (with_bias) bv = prepared(b, DType::kF32, {N}, bias.data());
                     b.bias_activation(x.view, bv, act, out.view);
                     return std::vector<Output>{download(b, out.view, "out")};
                   }});
        }
}

TEST(BackendOps, RopeTable) {
  Harness h;
  const int64_t H = 16, D = kVisionHidden / 16;  // the tower's 16 heads of 72
  for (int64_t T : kTokens)
    h.check({"rope_table", cat("T=", T, " H=", H, " D=", D, " k of a fused qkv"), OpClass::kMath, kNmseExactMath,
             [=](Backend& b, uint32_t seed) {
               // x = the k third of a [T, 3 H D] qkv output: token rows strided.
               DeviceTensor qkv = upload(b, DType::kBF16, {T, 3 * H * D}, to_bf16(random_f32(T * 3 * H * D, seed)), "qkv");
               TensorView k = columns_of(qkv.view, H * D, H * D);
               k.rank = 3;
               k.shape = {T, H, D, 0};
               k.stride = {3 * H * D, D, 1, 0};
               std::vector<float> c(T * D), s(T * D);
               std::mt19937 rng(seed + 1);
               std::uniform_real_distribution<float> angle(-100.0f, 100.0f);
               for (int64_t i = 0; i < T * D; ++i) {
                 const float a = angle(rng);
                 c[i] = std::cos(a), s[i] = std::sin(a);
               }
               DeviceTensor cd = upload(b, DType::kF32, {T, D}, c, "cos"), sd = upload(b, DType::kF32, {T, D}, s, "sin");
               b.rope_table(k, cd.view, sd.view);
               return std::vector<Output>{download(b, qkv.view, "qkv")};
             }});
}

// ---- batch invariance -------------------------------------------------------------------------

// Runs an op on rows [r0, r0 + n) of fixed host inputs and returns its output ([n, ...] bytes).
using RowOp = std::function<Output(Backend&, int64_t r0, int64_t n)>;

void check_row_invariance(const std::string& what, int64_t R, std::size_t out_row_bytes, const RowOp& op) {
  Harness h;
  for (Harness::Column& col : h.columns()) {
    Backend& b = *col.backend;
    const Output all = op(b, 0, R);
    for (int64_t r : {int64_t{0}, R / 3, R - 1}) {
      const Output one = op(b, r, 1);
      if (!same_bytes(all, static_cast<std::size_t>(r) * out_row_bytes, one, 0, out_row_bytes,
                      cat(col.spec.name, " ", what, ": row ", r, " alone vs in a batch of ", R)))
        break;
    }
  }
}

template <class T>
std::vector<T> slice(const std::vector<T>& v, int64_t width, int64_t r0, int64_t n) {
  return std::vector<T>(v.begin() + r0 * width, v.begin() + (r0 + n) * width);
}

TEST(BackendOpsBatchInvariance, RowOps) {
  const int64_t R = 64, D = kHidden;
  const auto x = to_bf16(random_f32(R * D, 1, 3.0f)), z = to_bf16(random_f32(R * D, 2, 3.0f));
  const auto w = random_bf16_values(D, 3, 0.5f), lb = random_bf16_values(D, 4, 0.1f);
  check_row_invariance("rmsnorm", R, D * 2, [&](Backend& b, int64_t r0, int64_t n) {
    DeviceTensor xd = upload(b, DType::kBF16, {n, D}, slice(x, D, r0, n), "x");
    b.rmsnorm(xd.view, prepared(b, DType::kF32, {D}, w.data()), 1e-6f, NormKind::kOnePlus, xd.view);
    return download(b, xd.view, "out");
  });
  check_row_invariance("rmsnorm_gated", R, D * 2, [&](Backend& b, int64_t r0, int64_t n) {
    DeviceTensor xd = upload(b, DType::kBF16, {n, D}, slice(x, D, r0, n), "x");
    DeviceTensor zd = upload(b, DType::kBF16, {n, D}, slice(z, D, r0, n), "z");
    b.rmsnorm_gated(xd.view, zd.view, prepared(b, DType::kF32, {D}, w.data()), 1e-6f, xd.view);
    return download(b, xd.view, "out");
  });
  check_row_invariance("layernorm", R, D * 2, [&](Backend& b, int64_t r0, int64_t n) {
    DeviceTensor xd = upload(b, DType::kBF16, {n, D}, slice(x, D, r0, n), "x");
    b.layernorm(xd.view, prepared(b, DType::kF32, {D}, w.data()), prepared(b, DType::kF32, {D}, lb.data()), 1e-6f,
                xd.view);
    return download(b, xd.view, "out");
  });
  const RopeConfig cfg;
  const int64_t heads = 8, HD = heads * cfg.head_dim;
  const auto q = to_bf16(random_f32(R * HD, 5, 2.0f));
  const auto pos = mrope_positions(R, 100000, 6);
  check_row_invariance("M-RoPE", R, HD * 2, [&](Backend& b, int64_t r0, int64_t n) {
    DeviceTensor xd = upload(b, DType::kBF16, {n, heads, cfg.head_dim}, slice(q, HD, r0, n), "x");
    std::vector<int64_t> p(3 * n);
    for (int a = 0; a < 3; ++a)
      for (int64_t t = 0; t < n; ++t) p[a * n + t] = pos[a * R + r0 + t];
    DeviceTensor pd = upload(b, DType::kI64, {3, n}, p, "positions");
    b.rope(xd.view, pd.view, cfg);
    return download(b, xd.view, "x");
  });
}

// ---- argument checks --------------------------------------------------------------------------

TEST(BackendOps, RowOpsRejectBadArgumentsOnEveryBackend) {
  Harness h;
  for (Harness::Column& col : h.columns()) {
    SCOPED_TRACE(col.spec.name);
    Backend& b = *col.backend;
    const std::vector<float> w(64, 0.0f);
    DeviceTensor wide = alloc(b, DType::kBF16, {4, 96}, "wide");
    DeviceTensor out = alloc(b, DType::kBF16, {4, 64}, "out");
    const TensorView wv = prepared(b, DType::kF32, {64}, w.data());
    // rmsnorm takes contiguous rows only; a weight of the wrong width.
    EXPECT_THROW(b.rmsnorm(columns_of(wide.view, 0, 64), wv, 1e-6f, NormKind::kOnePlus, out.view), std::invalid_argument);
    EXPECT_THROW(b.rmsnorm(out.view, prepared(b, DType::kF32, {32}, w.data()), 1e-6f, NormKind::kOnePlus, out.view),
                 std::invalid_argument);
    // rope: an odd rotary_dim, positions of the wrong length.
    DeviceTensor x = alloc(b, DType::kBF16, {2, 1, 64}, "x");
    DeviceTensor p2 = alloc(b, DType::kI64, {2}, "positions"), p3 = alloc(b, DType::kI64, {3}, "positions");
    RopeConfig odd;
    odd.head_dim = 64, odd.rotary_dim = 31;
    EXPECT_THROW(b.rope(x.view, p2.view, odd), std::invalid_argument);
    RopeConfig small;
    small.head_dim = 64, small.rotary_dim = 32;
    EXPECT_THROW(b.rope(x.view, p3.view, small), std::invalid_argument);
    // rope_table: an odd head dim.
    DeviceTensor xo = alloc(b, DType::kBF16, {2, 1, 7}, "x"), cs = alloc(b, DType::kF32, {2, 7}, "cos");
    EXPECT_THROW(b.rope_table(xo.view, cs.view, cs.view), std::invalid_argument);
    // to_bf16 of different sizes; state_copy of different layer counts.
    DeviceTensor f = alloc(b, DType::kF32, {4, 63}, "f");
    EXPECT_THROW(b.to_bf16(f.view, out.view), std::invalid_argument);
    GdnDims d;
    const std::vector<GdnStateRef> one(1), two(2);
    EXPECT_THROW(b.state_copy(one, two, d), std::invalid_argument);
    // An id below the table.
    const std::vector<uint16_t> table(10 * 64, 0);
    DeviceTensor ids = upload(b, DType::kI32, {2}, std::vector<int32_t>{0, -1}, "ids");
    DeviceTensor eo = alloc(b, DType::kBF16, {2, 64}, "out");
    EXPECT_THROW(b.embedding(prepared(b, DType::kBF16, {10, 64}, table.data()), ids.view, eo.view), std::out_of_range);
  }
}

}  // namespace
}  // namespace fp4serve::kernels::test::ops
