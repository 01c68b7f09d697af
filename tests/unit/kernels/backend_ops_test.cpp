// The backend op harness (backend_ops_harness.h) on the element-wise, norm, RoPE, gating and data
// movement ops of the Backend table. Linears and MoE: backend_ops_linear_test.cpp; KV write,
// attention and the GDN sequence op: backend_ops_sequence_test.cpp.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "backend_ops_harness.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention_cpu.h"
#include "kernels/cpu/gdn_cpu.h"

namespace fp4serve::kernels::test::ops {
namespace {

// The harness itself: a column off the reference by more than the threshold, or with different bits
// where its contract requires the same, or a NaN where the reference has a number, fails the case;
// a column within the threshold where bits may differ passes.
TEST(BackendOpsHarness, FlagsColumnsOffTheReference) {
  Harness h;
  ASSERT_FALSE(h.columns().empty());
  // The reference's numbers; on the columns `pick` selects, `edit` changes them first.
  using Edit = std::function<void(std::vector<float>&)>;
  auto perturbed = [&h](OpClass cls, double max_nmse, Edit edit, std::function<bool(const BackendSpec&)> pick) {
    return Case{"selftest", "perturbed", cls, max_nmse, [&h, edit, pick](Backend& b, uint32_t seed) {
                  std::vector<float> v = random_f32(64, seed);
                  for (Harness::Column& c : h.columns())
                    if (c.backend.get() == &b && pick(c.spec)) edit(v);
                  DeviceTensor t = upload(b, DType::kF32, {64}, v, "v");
                  return std::vector<Output>{download(b, t.view, "v")};
                }};
  };
  auto every = [](const BackendSpec&) { return true; };
  const Edit one_ulp = [](std::vector<float>& v) { v[3] = std::nextafter(v[3], INFINITY); };
  EXPECT_NONFATAL_FAILURE(h.check(perturbed(
                              OpClass::kMath, kNmseExactMath, [](std::vector<float>& v) { v[5] *= 1.01f; }, every)),
                          "off the reference");
  EXPECT_NONFATAL_FAILURE(h.check(perturbed(OpClass::kMove, 1.0, one_ulp, every)), "off the reference");
  EXPECT_NONFATAL_FAILURE(h.check(perturbed(
                              OpClass::kMatmul, 1.0, [](std::vector<float>& v) { v[0] = NAN; }, every)),
                          "off the reference");
  // One ulp in 64 values is far inside 5e-4: it fails a column whose contract requires identical bits
  // (every CPU tier below avx512_bf16) and passes one whose contract does not.
  EXPECT_NONFATAL_FAILURE(h.check(perturbed(OpClass::kMatmul, kNmseMatmul, one_ulp, every)), "off the reference");
  h.check(perturbed(OpClass::kMatmul, kNmseMatmul, one_ulp,
                    [](const BackendSpec& s) { return !s.bit_exact(OpClass::kMatmul); }));
  EXPECT_EQ(nmse({1.0, 2.0}, {1.0, 2.0}), 0.0);
  EXPECT_DOUBLE_EQ(nmse({1.0, 3.0}, {1.0, 2.0}), 1.0 / 5.0);
  EXPECT_EQ(nmse({1.0}, {1.0, 2.0}), INFINITY);
}

TEST(BackendOps, Embedding) {
  Harness h;
  for (auto [V, H, T] : {std::tuple<int64_t, int64_t, int64_t>{50, 64, 1}, {50, 64, 9}, {1000, 200, 17}}) {
    h.check({"embedding", cat("V=", V, " H=", H, " T=", T), OpClass::kMove, kNmseMove, [=](Backend& b, uint32_t seed) {
               const auto table = to_bf16(random_f32(V * H, seed));
               std::mt19937 rng(seed + 1);
               std::vector<int32_t> ids(T);
               for (auto& id : ids) id = static_cast<int32_t>(rng() % V);
               ids.front() = static_cast<int32_t>(V - 1);  // both ends of the table
               ids.back() = 0;
               const TensorView tv = prepared(b, DType::kBF16, {V, H}, table.data());
               DeviceTensor idv = upload(b, DType::kI32, {T}, ids, "ids");
               DeviceTensor out = alloc(b, DType::kBF16, {T, H}, "out");
               b.embedding(tv, idv.view, out.view);
               return std::vector<Output>{download(b, out.view, "out")};
             }});
  }
}

TEST(BackendOps, RmsNormOutOfPlaceAndInPlace) {
  Harness h;
  for (auto [R, D] : {std::pair<int64_t, int64_t>{1, 64}, {6, 100}, {5, 2048}}) {
    h.check({"rmsnorm", cat("R=", R, " D=", D), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               const auto x = to_bf16(random_f32(R * D, seed, 3.0f));
               const auto w = random_bf16_values(D, seed + 1, 0.5f);
               const TensorView wv = prepared(b, DType::kF32, {D}, w.data());
               DeviceTensor xd = upload(b, DType::kBF16, {R, D}, x, "x");
               DeviceTensor out = alloc(b, DType::kBF16, {R, D}, "out");
               b.rmsnorm(xd.view, wv, 1e-6f, NormKind::kOnePlus, out.view);
               b.rmsnorm(xd.view, wv, 1e-6f, NormKind::kOnePlus, xd.view);  // x and out may alias
               return std::vector<Output>{download(b, out.view, "out"), download(b, xd.view, "in place")};
             }});
  }
}

TEST(BackendOps, RmsNormGated) {
  Harness h;
  for (auto [R, D] : {std::pair<int64_t, int64_t>{1, 128}, {12, 40}, {7, 128}}) {
    h.check({"rmsnorm_gated", cat("R=", R, " D=", D), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               const auto x = to_bf16(random_f32(R * D, seed, 2.0f));
               const auto z = to_bf16(random_f32(R * D, seed + 1, 2.0f));
               const auto w = random_bf16_values(D, seed + 2, 0.5f);
               const TensorView wv = prepared(b, DType::kF32, {D}, w.data());
               DeviceTensor xd = upload(b, DType::kBF16, {R, D}, x, "x");
               DeviceTensor zd = upload(b, DType::kBF16, {R, D}, z, "z");
               DeviceTensor out = alloc(b, DType::kBF16, {R, D}, "out");
               b.rmsnorm_gated(xd.view, zd.view, wv, 1e-6f, out.view);
               return std::vector<Output>{download(b, out.view, "out")};
             }});
  }
}

// fp32 values around bf16's rounding boundaries: exact ties (both parities), subnormals, signed
// zeros, infinities and values that overflow bf16.
std::vector<float> bf16_rounding_inputs(int64_t n, uint32_t seed) {
  std::vector<float> v = random_f32(static_cast<std::size_t>(n), seed, 3.0f);
  const float inf = std::numeric_limits<float>::infinity(), tie = 1.0f + 1.0f / 256, odd_tie = 1.0f + 3.0f / 256;
  const float specials[] = {0.0f, -0.0f, tie, odd_tie, -tie, 1e-40f, -3e-39f, inf, -inf, 3.4e38f, -3.39e38f};
  std::mt19937 rng(seed + 1);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i < std::size(specials)) {
      v[i] = specials[i];
    } else if (rng() % 4 == 0) {  // an exact tie: the 16 dropped bits are 0x8000
      uint32_t u;
      std::memcpy(&u, &v[i], 4);
      u = (u & 0xFFFF0000u) | 0x8000u;
      std::memcpy(&v[i], &u, 4);
    }
  }
  return v;
}

TEST(BackendOps, ToBf16AndRoundBf16) {
  Harness h;
  for (auto [R, C] : {std::pair<int64_t, int64_t>{1, 37}, {8, 300}}) {
    h.check({"to_bf16", cat("R=", R, " C=", C), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               const auto x = bf16_rounding_inputs(R * C, seed);
               DeviceTensor xd = upload(b, DType::kF32, {R, C}, x, "x");
               DeviceTensor out = alloc(b, DType::kBF16, {R, C}, "out");
               b.to_bf16(xd.view, out.view);
               return std::vector<Output>{download(b, out.view, "out")};
             }});
    h.check({"round_bf16", cat("R=", R, " C=", C), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               const auto x = bf16_rounding_inputs(R * C, seed);
               DeviceTensor xd = upload(b, DType::kF32, {R, C}, x, "x");
               b.round_bf16(xd.view);
               return std::vector<Output>{download(b, xd.view, "x")};
             }});
  }
}

TEST(BackendOps, ResidualAdd) {
  Harness h;
  for (auto [R, H] : {std::pair<int64_t, int64_t>{1, 64}, {9, 2048}}) {
    h.check({"residual_add", cat("R=", R, " H=", H), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               DeviceTensor x = upload(b, DType::kBF16, {R, H}, to_bf16(random_f32(R * H, seed, 4.0f)), "x");
               DeviceTensor y = upload(b, DType::kBF16, {R, H}, to_bf16(random_f32(R * H, seed + 1)), "y");
               b.residual_add(x.view, y.view);
               return std::vector<Output>{download(b, x.view, "x")};
             }});
  }
}

TEST(BackendOps, Rope) {
  Harness h;
  RopeConfig qwen;  // head_dim 256, rotary 64, theta 1e7: the model's
  RopeConfig small;
  small.head_dim = 64;
  small.rotary_dim = 32;
  small.theta = 1e4f;
  small.sections[0] = 6, small.sections[1] = 5, small.sections[2] = 5;
  struct Shape {
    RopeConfig cfg;
    int64_t T, heads, max_pos;
  };
  for (const Shape& s : {Shape{qwen, 1, 2, 10}, Shape{qwen, 6, 4, 200000}, Shape{small, 9, 3, 5000}}) {
    h.check({"rope", cat("head_dim=", s.cfg.head_dim, " rot=", s.cfg.rotary_dim, " T=", s.T, " heads=", s.heads),
             OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               const int64_t D = s.cfg.head_dim;
               std::mt19937 rng(seed);
               std::vector<int64_t> pos(s.T);
               for (auto& p : pos) p = static_cast<int64_t>(rng() % (s.max_pos + 1));
               pos.front() = 0;
               DeviceTensor x =
                   upload(b, DType::kBF16, {s.T, s.heads, D}, to_bf16(random_f32(s.T * s.heads * D, seed + 1)), "x");
               DeviceTensor p = upload(b, DType::kI64, {s.T}, pos, "positions");
               b.rope(x.view, p.view, s.cfg);
               return std::vector<Output>{download(b, x.view, "x")};
             }});
  }
}

TEST(BackendOps, GdnGating) {
  Harness h;
  for (auto [T, Hv] : {std::pair<int64_t, int>{1, 4}, {7, 32}}) {
    h.check({"gdn_gating", cat("T=", T, " Hv=", Hv), OpClass::kMath, kNmseExactMath, [=](Backend& b, uint32_t seed) {
               // a spread wide enough that some a + dt_bias pass softplus's threshold of 20
               const auto a = random_bf16_values(T * Hv, seed, 8.0f);
               const auto bb = random_bf16_values(T * Hv, seed + 1, 3.0f);
               const auto A_log = random_bf16_values(Hv, seed + 2);
               const auto dt = random_bf16_values(Hv, seed + 3, 2.0f);
               DeviceTensor ad = upload(b, DType::kF32, {T, Hv}, a, "a");
               DeviceTensor bd = upload(b, DType::kF32, {T, Hv}, bb, "b");
               const TensorView Av = prepared(b, DType::kF32, {Hv}, A_log.data());
               const TensorView dv = prepared(b, DType::kF32, {Hv}, dt.data());
               DeviceTensor g = alloc(b, DType::kF32, {T, Hv}, "g");
               DeviceTensor beta = alloc(b, DType::kF32, {T, Hv}, "beta");
               b.gdn_gating(ad.view, bd.view, Av, dv, g.view, beta.view);
               return std::vector<Output>{download(b, g.view, "g"), download(b, beta.view, "beta")};
             }});
  }
}

// Two state entries of three GDN layers in one arena; entry 0 random, entry 1 something else.
struct StateArena {
  DeviceTensor conv, ssm;
  std::vector<GdnStateRef> entry[2];
};

StateArena make_state_arena(Backend& b, const GdnDims& d, int layers, uint32_t seed) {
  StateArena a;
  const int64_t cs = d.conv_state_elems(), ss = d.state_elems(), n = 2 * layers;
  a.conv = upload(b, DType::kBF16, {n, cs}, to_bf16(random_f32(n * cs, seed)), "conv states");
  a.ssm = upload(b, DType::kF32, {n, ss}, random_f32(n * ss, seed + 1), "ssm states");
  for (int e = 0; e < 2; ++e)
    for (int l = 0; l < layers; ++l)
      a.entry[e].push_back(
          {a.conv.view.as<uint16_t>() + (e * layers + l) * cs, a.ssm.view.as<float>() + (e * layers + l) * ss});
  return a;
}

TEST(BackendOps, StateCopyAndZero) {
  Harness h;
  GdnDims d;
  d.Hk = 2, d.Hv = 4, d.dk = 16, d.dv = 24, d.conv_kernel = 4;
  h.check({"state_copy", "layers=3 entry 0 -> 1", OpClass::kMove, kNmseMove, [=](Backend& b, uint32_t seed) {
             StateArena a = make_state_arena(b, d, 3, seed);
             b.state_copy(a.entry[1], a.entry[0], d);
             return std::vector<Output>{download(b, a.conv.view, "conv"), download(b, a.ssm.view, "ssm")};
           }});
  h.check({"state_zero", "layers 0 and 2 of entry 1", OpClass::kMove, kNmseMove, [=](Backend& b, uint32_t seed) {
             StateArena a = make_state_arena(b, d, 3, seed);
             const GdnStateRef some[] = {a.entry[1][0], a.entry[1][2]};
             b.state_zero(some, d);
             return std::vector<Output>{download(b, a.conv.view, "conv"), download(b, a.ssm.view, "ssm")};
           }});
}

TEST(BackendOps, GatherRows) {
  Harness h;
  for (bool strided : {false, true}) {
    const int64_t R = 11, H = 96;
    h.check({"gather_rows", cat("R=", R, " H=", H, strided ? " x row-strided" : " x contiguous"), OpClass::kMove,
             kNmseMove, [=](Backend& b, uint32_t seed) {
               const int64_t W = strided ? H + 40 : H;  // x = the first H columns of a [R, W] buffer
               DeviceTensor xs = upload(b, DType::kBF16, {R, W}, to_bf16(random_f32(R * W, seed)), "x");
               const TensorView x = columns_of(xs.view, 0, H);
               const std::vector<int64_t> rows = {R - 1, 0, 4, 4, 7};
               DeviceTensor out = alloc(b, DType::kBF16, {static_cast<int64_t>(rows.size()), H}, "out");
               b.gather_rows(x, rows, out.view);
               return std::vector<Output>{download(b, out.view, "out")};
             }});
  }
}

// copy between contiguous views and the row-strided halves of a wider matrix (how the model splits
// q_proj's [q | gate] rows), and zero on a range of rows; the whole destination is read back, so a
// write outside the view shows.
TEST(BackendOps, CopyStridedAndZero) {
  Harness h;
  const int64_t R = 13, C = 48;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const std::string t(dtype_name(dt));
    auto fill = [dt](Backend& b, int64_t rows, int64_t cols, uint32_t seed, const char* what) {
      const auto v = random_f32(rows * cols, seed);
      return dt == DType::kBF16 ? upload(b, dt, {rows, cols}, to_bf16(v), what) : upload(b, dt, {rows, cols}, v, what);
    };
    h.check(
        {"copy", cat(t, " [", R, ", ", C, "] contiguous"), OpClass::kMove, kNmseMove, [=](Backend& b, uint32_t seed) {
           DeviceTensor src = fill(b, R, C, seed, "src"), dst = fill(b, R, C, seed + 1, "dst");
           b.copy(dst.view, src.view);
           return std::vector<Output>{download(b, dst.view, "dst")};
         }});
    h.check(
        {"copy", cat(t, " strided halves -> contiguous"), OpClass::kMove, kNmseMove, [=](Backend& b, uint32_t seed) {
           DeviceTensor src = fill(b, R, 2 * C, seed, "src"), lo = fill(b, R, C, seed + 1, "lo"),
                        hi = fill(b, R, C, seed + 2, "hi");
           b.copy(lo.view, columns_of(src.view, 0, C));
           b.copy(hi.view, columns_of(src.view, C, C));
           return std::vector<Output>{download(b, lo.view, "lo"), download(b, hi.view, "hi")};
         }});
    h.check({"copy", cat(t, " contiguous -> strided rows 2..11"), OpClass::kMove, kNmseMove,
             [=](Backend& b, uint32_t seed) {
               DeviceTensor src = fill(b, 9, C, seed, "src"), dst = fill(b, R, C + 20, seed + 1, "dst");
               b.copy(columns_of(dst.view, 7, C, 2, 9), src.view);
               return std::vector<Output>{download(b, dst.view, "dst")};
             }});
    h.check({"zero", cat(t, " rows 3..9 of ", R), OpClass::kMove, kNmseMove, [=](Backend& b, uint32_t seed) {
               DeviceTensor x = fill(b, R, C, seed, "x");
               b.zero(x.view.rows(3, 7));
               return std::vector<Output>{download(b, x.view, "x")};
             }});
  }
}

// What backend.h says an op throws for, on every backend (before touching memory it does not own).
TEST(BackendOps, BadArgumentsThrowOnEveryBackend) {
  Harness h;
  for (Harness::Column& col : h.columns()) {
    SCOPED_TRACE(col.spec.name);
    Backend& b = *col.backend;
    const std::vector<uint16_t> table(10 * 8, 0);
    DeviceTensor ids = upload(b, DType::kI32, {2}, std::vector<int32_t>{3, 10}, "ids");
    DeviceTensor out = alloc(b, DType::kBF16, {2, 8}, "out");
    EXPECT_ANY_THROW(b.embedding(prepared(b, DType::kBF16, {10, 8}, table.data()), ids.view, out.view));
    DeviceTensor x = alloc(b, DType::kBF16, {4, 8}, "x");
    const std::vector<int64_t> outside = {1, 4};
    EXPECT_THROW(b.gather_rows(x.view, outside, out.view), std::exception);
    RandomWeight w = make_random_weight(WeightKind::kBf16, 5, 16, 1);  // K 16 for x of K 8
    DeviceTensor y = alloc(b, DType::kF32, {4, 5}, "y");
    const LinearOut o{b.prepare_linear(w.view), y.view};
    EXPECT_THROW(b.linears(x.view, {&o, 1}), std::invalid_argument);
    // A KV write past a contiguous cache's capacity.
    DeviceTensor kc = alloc(b, DType::kBF16, {4, 1, 8}, "k cache"), vc = alloc(b, DType::kBF16, {4, 1, 8}, "v cache");
    KvView kv;
    kv.k = kc.view.data, kv.v = vc.view.data, kv.capacity = 4, kv.n_kv_heads = 1, kv.head_dim = 8;
    DeviceTensor k = alloc(b, DType::kBF16, {2, 1, 8}, "k");
    const AttentionSeqDesc past{{0, 2, 3}, kv};
    EXPECT_ANY_THROW(b.kv_write({&past, 1}, k.view, k.view));
  }
}

// An output made on the host from the op's results (sample writes host structs, not device views).
template <class T>
Output host_output(const std::string& name, const std::vector<T>& v) {
  Output o;
  o.name = name;
  o.bytes.resize(v.size() * sizeof(T));
  std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
  for (const T& x : v) o.values.push_back(static_cast<double>(x));
  return o;
}

// Sampling: the same tokens, ranks and top lists on every backend, logprobs within the exact-math
// threshold, the engine generator advanced alike, and the logits restored. Skipped while the CPU
// backend's sample is the stub that throws std::logic_error.
TEST(BackendOps, Sample) {
  Harness h;
  {
    std::vector<float> one(8, 0.0f);
    DeviceTensor l = upload(h.reference(), DType::kF32, {1, 8}, one, "logits");
    SamplingOptions greedy;
    greedy.temperature = 0;
    SampleRow row{&greedy, {}, {}, {}};
    SampleResult res;
    SamplingConfig cfg;
    cfg.vocab_size = cfg.valid_vocab_size = 8;
    try {
      h.reference().sample(l.view, {&row, 1}, cfg, {&res, 1});
    } catch (const std::logic_error& e) {
      GTEST_SKIP() << "Backend::sample is not implemented yet: " << e.what();
    }
  }
  const int64_t V = 300, valid = 290, R = 5;
  h.check({"sample", cat("rows=", R, " V=", V, " valid=", valid), OpClass::kMath, kNmseExactMath,
           [=](Backend& b, uint32_t seed) {
             const auto logits = random_f32(R * V, seed, 3.0f);
             DeviceTensor l = upload(b, DType::kF32, {R, V}, logits, "logits");
             std::vector<SamplingOptions> opt(R);
             opt[0].temperature = 0;  // greedy
             opt[1].temperature = 0.7, opt[1].top_k = 20, opt[1].seed = 5;
             opt[2].top_p = 0.8, opt[2].seed = 9, opt[2].logprobs = 4;
             opt[3].min_p = 0.1, opt[3].seed = 3, opt[3].presence_penalty = 0.5, opt[3].frequency_penalty = 0.3;
             opt[3].repetition_penalty = 1.2, opt[3].logprobs = 2;
             // opt[4]: unseeded, temperature 1: a draw of the engine generator
             const std::vector<int32_t> prompt = {1, 5, 9, 200}, generated = {7, 7, 42};
             std::vector<TokenLogprob> top(R * 4);
             std::vector<SampleRow> rows(R);
             for (int64_t r = 0; r < R; ++r)
               rows[r] = {&opt[r], prompt, generated, std::span<TokenLogprob>(top.data() + r * 4, 4)};
             uint64_t draws = 0;
             SamplingConfig cfg;
             cfg.vocab_size = V, cfg.valid_vocab_size = valid, cfg.seed = seed, cfg.engine_draws = &draws;
             std::vector<SampleResult> res(R);
             b.sample(l.view, rows, cfg, res);
             std::vector<int64_t> ints;
             std::vector<float> lps;
             for (const SampleResult& x : res) {
               ints.insert(ints.end(), {x.token, x.has_logprobs, x.rank, x.num_top});
               lps.push_back(x.logprob);
             }
             for (const TokenLogprob& t : top) ints.push_back(t.token), lps.push_back(t.logprob);
             ints.push_back(static_cast<int64_t>(draws));
             return std::vector<Output>{host_output("tokens, ranks, top ids, draws", ints),
                                        host_output("logprobs", lps), download(b, l.view, "logits after")};
           }});
}

}  // namespace
}  // namespace fp4serve::kernels::test::ops
