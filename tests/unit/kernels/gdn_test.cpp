#include "kernels/gdn.h"

#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kernels/activation.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/gdn_cpu.h"

namespace fp4serve::kernels {
namespace {

using test::same_bits;

TEST(GdnConv, MatchesDoubleFormulaAndCarriesStateAcrossSplits) {
  const int64_t T = 10, C = 40;
  const int Kc = 4;
  auto xv = test::random_bf16_values(T * C, 1);
  auto wv = test::random_bf16_values(C * Kc, 2, 0.5f);
  auto x = test::to_bf16(xv), w = test::to_bf16(wv);
  std::vector<uint16_t> state(3 * C, 0), out(T * C);
  gdn_conv1d(x.data(), T, C, w.data(), Kc, state.data(), out.data());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      double pre = 0;
      for (int j = 0; j < Kc; ++j) {
        const int64_t src = t - (Kc - 1) + j;
        if (src >= 0) pre += double(wv[c * Kc + j]) * xv[src * C + c];
      }
      const double p = round_bf16(static_cast<float>(pre));
      const double want = p / (1 + std::exp(-p));
      EXPECT_NEAR(bf16_bits_to_f32(out[t * C + c]), want, std::ldexp(std::fabs(want), -7) + 1e-6);
    }
  }
  for (int j = 0; j < 3; ++j)  // state = last three raw inputs, oldest first
    for (int64_t c = 0; c < C; ++c) ASSERT_EQ(state[j * C + c], x[(T - 3 + j) * C + c]);
  // Splits 1 + 2 + 7 give the same outputs and state.
  std::vector<uint16_t> st2(3 * C, 0), out2(T * C);
  int64_t t0 = 0;
  for (int64_t n : {1, 2, 7}) {
    gdn_conv1d(x.data() + t0 * C, n, C, w.data(), Kc, st2.data(), out2.data() + t0 * C);
    t0 += n;
  }
  EXPECT_EQ(out2, out);
  EXPECT_EQ(st2, state);
}

TEST(GdnGating, MatchesHfFormula) {
  const int Hv = 4;
  const float a[] = {-3.0f, 0.5f, 19.5f, 25.0f}, b[] = {-2.0f, 0.0f, 1.5f, 8.0f};
  const float A_log[] = {0.0f, 1.0f, -1.0f, 2.0f}, dt[] = {1.0f, 0.5f, 0.75f, -1.0f};
  float g[4], beta[4];
  gdn_gating(a, b, A_log, dt, 1, Hv, g, beta);
  for (int h = 0; h < Hv; ++h) {
    const double x = double(a[h]) + dt[h];
    const double sp = x > 20 ? x : std::log1p(std::exp(x));
    EXPECT_NEAR(g[h], -std::exp(double(A_log[h])) * sp, 1e-5 * std::fabs(sp * std::exp(A_log[h])));
    EXPECT_EQ(beta[h], round_bf16(sigmoid(b[h])));
  }
  EXPECT_EQ(g[3], -std::exp(2.0f) * 24.0f);  // 25 - 1 = 24 > 20: softplus is the identity
}

struct GdnCase {
  GdnDims d;
  int64_t T;
  std::vector<uint16_t> qkv;
  std::vector<float> g, beta;
};

GdnCase make_case(int Hk, int Hv, int dk, int dv, int64_t T, uint32_t seed) {
  GdnCase c;
  c.d.Hk = Hk;
  c.d.Hv = Hv;
  c.d.dk = dk;
  c.d.dv = dv;
  c.T = T;
  c.qkv = test::to_bf16(test::random_f32(T * c.d.conv_dim(), seed));
  auto a = test::random_f32(T * Hv, seed + 1);
  c.g.resize(T * Hv);
  c.beta.resize(T * Hv);
  for (size_t i = 0; i < a.size(); ++i) {
    c.g[i] = -0.3f * std::fabs(a[i]);
    c.beta[i] = round_bf16(sigmoid(a[i] * 2.0f));
  }
  return c;
}

// The recurrence in double from the same inputs.
void reference(const GdnCase& c, std::vector<double>& S, std::vector<double>& out) {
  const GdnDims& d = c.d;
  const int64_t C = d.conv_dim(), KD = d.key_dim();
  out.assign(c.T * d.value_dim(), 0.0);
  for (int64_t t = 0; t < c.T; ++t) {
    for (int h = 0; h < d.Hv; ++h) {
      const int kh = h / (d.Hv / d.Hk);
      std::vector<double> q(d.dk), k(d.dk), v(d.dv);
      // transformers 5.12.1 applies l2norm to the bf16 tensors before the fp32 cast, so every op of
      // x * rsqrt(sum(x * x) + 1e-6) rounds to bf16 (the sum itself accumulates in fp32).
      auto l2norm_bf16 = [&](int64_t off, std::vector<double>& out) {
        float sum = 0;
        for (int i = 0; i < d.dk; ++i) {
          const float x = bf16_bits_to_f32(c.qkv[off + i]);
          sum += round_bf16(x * x);
        }
        const float inv = round_bf16(1.0f / std::sqrt(round_bf16(round_bf16(sum) + 1e-6f)));
        for (int i = 0; i < d.dk; ++i) out[i] = round_bf16(bf16_bits_to_f32(c.qkv[off + i]) * inv);
      };
      l2norm_bf16(t * C + kh * d.dk, q);
      l2norm_bf16(t * C + KD + kh * d.dk, k);
      for (int i = 0; i < d.dk; ++i) q[i] = q[i] / std::sqrt(double(d.dk));
      for (int j = 0; j < d.dv; ++j) v[j] = bf16_bits_to_f32(c.qkv[t * C + 2 * KD + h * d.dv + j]);
      double* s = S.data() + int64_t(h) * d.dk * d.dv;
      const double decay = std::exp(double(c.g[t * d.Hv + h])), beta = c.beta[t * d.Hv + h];
      for (int64_t i = 0; i < int64_t(d.dk) * d.dv; ++i) s[i] *= decay;
      for (int j = 0; j < d.dv; ++j) {
        double kvm = 0;
        for (int i = 0; i < d.dk; ++i) kvm += s[i * d.dv + j] * k[i];
        const double delta = (v[j] - kvm) * beta;
        double o = 0;
        for (int i = 0; i < d.dk; ++i) {
          s[i * d.dv + j] += k[i] * delta;
          o += s[i * d.dv + j] * q[i];
        }
        out[t * d.value_dim() + h * d.dv + j] = o;
      }
    }
  }
}

TEST(GdnRecurrent, PathsIdenticalAndMatchDoubleRecurrence) {
  for (int dim : {128, 32, 24}) {
    GdnCase c = make_case(2, 4, dim, dim, 6, 10 + dim);
    std::vector<float> S0 = test::random_f32(c.d.state_elems(), 3, 0.1f);
    std::vector<float> S = S0;
    std::vector<uint16_t> out(c.T * c.d.value_dim());
    gdn_recurrent(c.qkv.data(), c.T, c.d, c.g.data(), c.beta.data(), S.data(), out.data(), Isa::kScalar);
    std::vector<double> Sd(S0.begin(), S0.end()), od;
    reference(c, Sd, od);
    double omax = 0;
    for (double o : od) omax = std::max(omax, std::fabs(o));
    for (size_t i = 0; i < od.size(); ++i)
      ASSERT_NEAR(bf16_bits_to_f32(out[i]), od[i], std::ldexp(std::fabs(od[i]), -8) + 1e-5 * omax) << "dim " << dim << " i " << i << " omax " << omax;
    for (size_t i = 0; i < Sd.size(); ++i) ASSERT_NEAR(S[i], Sd[i], 1e-5 * (1 + std::fabs(Sd[i]))) << i;
    for (Isa isa : test::isas()) {
      std::vector<float> S2 = S0;
      std::vector<uint16_t> out2(out.size());
      gdn_recurrent(c.qkv.data(), c.T, c.d, c.g.data(), c.beta.data(), S2.data(), out2.data(), isa);
      EXPECT_EQ(out2, out) << cpu::isa_name(isa) << " dim " << dim;
      for (size_t i = 0; i < S.size(); ++i) ASSERT_TRUE(same_bits(S2[i], S[i])) << cpu::isa_name(isa);
    }
  }
}

TEST(GdnRecurrent, SplitPrefillAndThreadCountGiveIdenticalBits) {
  GdnCase c = make_case(2, 4, 128, 128, 9, 99);
  const int64_t VD = c.d.value_dim(), C = c.d.conv_dim();
  for (Isa isa : test::isas()) {
    std::vector<float> S(c.d.state_elems(), 0.0f);
    std::vector<uint16_t> whole(c.T * VD);
    cpu::set_num_threads(2);
    gdn_recurrent(c.qkv.data(), c.T, c.d, c.g.data(), c.beta.data(), S.data(), whole.data(), isa);
    cpu::set_num_threads(1);
    std::vector<float> S2(c.d.state_elems(), 0.0f);
    std::vector<uint16_t> parts(c.T * VD);
    int64_t t0 = 0;
    for (int64_t n : {1, 7, 1}) {
      gdn_recurrent(c.qkv.data() + t0 * C, n, c.d, c.g.data() + t0 * c.d.Hv, c.beta.data() + t0 * c.d.Hv, S2.data(),
                    parts.data() + t0 * VD, isa);
      t0 += n;
    }
    cpu::set_num_threads(0);
    EXPECT_EQ(parts, whole) << cpu::isa_name(isa);
    for (size_t i = 0; i < S.size(); ++i) ASSERT_TRUE(same_bits(S[i], S2[i]));
  }
}

}  // namespace
}  // namespace fp4serve::kernels
