#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "kernels/activation.h"
#include "kernels/cpu/norm_cpu.h"
#include "kernels/rope.h"
#include "kernels/cpu/rope_cpu.h"

namespace fp4serve::kernels {
namespace {

using test::same_bits;

// |a - b| within n bf16 ulps of |ref| (plus a tiny absolute floor).
void expect_bf16_close(float a, double ref, double ulps, double floor = 1e-6) {
  EXPECT_LE(std::fabs(a - ref), ulps * std::ldexp(std::fabs(ref), -8) + floor) << a << " vs " << ref;
}

TEST(RmsNorm1p, PathsIdenticalAndMatchDoubleFormula) {
  const int64_t rows = 9, D = 2048 + 32 + 5;
  auto xv = test::random_bf16_values(rows * D, 1, 2.0f);
  auto x = test::to_bf16(xv);
  auto w = test::random_bf16_values(D, 2, 0.1f);
  std::vector<uint16_t> ref(rows * D);
  rmsnorm_1p(x.data(), rows, D, w.data(), 1e-6f, ref.data(), Isa::kScalar);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(xv[r * D + i]) * xv[r * D + i];
    const double inv = 1.0 / std::sqrt(ss / D + 1e-6);
    for (int64_t i = 0; i < D; ++i)
      expect_bf16_close(bf16_bits_to_f32(ref[r * D + i]), xv[r * D + i] * inv * (1.0 + w[i]), 1.01);
  }
  for (Isa isa : test::isas()) {
    std::vector<uint16_t> y(rows * D);
    rmsnorm_1p(x.data(), rows, D, w.data(), 1e-6f, y.data(), isa);
    EXPECT_EQ(y, ref) << cpu::isa_name(isa);
  }
}

TEST(RmsNormGated, PathsIdenticalAndMatchDoubleFormula) {
  const int64_t rows = 64, D = 128;
  auto xv = test::random_bf16_values(rows * D, 3);
  auto zv = test::random_bf16_values(rows * D, 4, 2.0f);
  auto x = test::to_bf16(xv), z = test::to_bf16(zv);
  auto w = test::random_bf16_values(D, 5, 1.0f);
  std::vector<uint16_t> ref(rows * D);
  rmsnorm_gated(x.data(), z.data(), rows, D, w.data(), 1e-6f, ref.data(), Isa::kScalar);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(xv[r * D + i]) * xv[r * D + i];
    const double inv = 1.0 / std::sqrt(ss / D + 1e-6);
    for (int64_t i = 0; i < D; ++i) {
      const double zz = zv[r * D + i];
      const double want = xv[r * D + i] * inv * w[i] * zz / (1 + std::exp(-zz));
      expect_bf16_close(bf16_bits_to_f32(ref[r * D + i]), want, 3.05);  // three bf16 roundings
    }
  }
  // The exact HF cast order for one element, spelled out.
  {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(xv[i]) * xv[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss) / D + 1e-6f);
    const float n = round_bf16(xv[7] * inv), y = round_bf16(w[7] * n);
    const float want = round_bf16(y * silu(zv[7]));
    EXPECT_NEAR(bf16_bits_to_f32(ref[7]), want, std::ldexp(std::fabs(want), -8));
  }
  for (Isa isa : test::isas()) {
    std::vector<uint16_t> y(rows * D);
    rmsnorm_gated(x.data(), z.data(), rows, D, w.data(), 1e-6f, y.data(), isa);
    EXPECT_EQ(y, ref) << cpu::isa_name(isa);
  }
}

TEST(L2Norm, PathsIdenticalAndUnitLength) {
  auto x = test::random_f32(16 * 128, 6);
  auto ref = x;
  l2norm_rows(ref.data(), 16, 128, 1e-6f, Isa::kScalar);
  for (int r = 0; r < 16; ++r) {
    double ss = 0;
    for (int i = 0; i < 128; ++i) ss += double(x[r * 128 + i]) * x[r * 128 + i];
    for (int i = 0; i < 128; ++i) EXPECT_NEAR(ref[r * 128 + i], x[r * 128 + i] / std::sqrt(ss + 1e-6), 1e-6);
  }
  for (Isa isa : test::isas()) {
    auto y = x;
    l2norm_rows(y.data(), 16, 128, 1e-6f, isa);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(same_bits(y[i], ref[i]));
  }
}

TEST(Rope, TextPositionsRotateNeoxPairsWithBf16CosSin) {
  RopeConfig cfg;
  const int64_t T = 5, H = 3;
  auto xv = test::random_bf16_values(T * H * 256, 7);
  auto x = test::to_bf16(xv);
  const int64_t pos[T] = {0, 1, 17, 1000, 262143};
  apply_rope_text(x.data(), T, H, cfg, pos);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      const float* in = xv.data() + (t * H + h) * 256;
      const uint16_t* o = x.data() + (t * H + h) * 256;
      for (int i = 0; i < 64; ++i) {
        const int f = i % 32;
        const double ang = double(pos[t]) * std::pow(1e7, -2.0 * f / 64.0);
        const double c = round_bf16(static_cast<float>(std::cos(ang)));
        const double s = round_bf16(static_cast<float>(std::sin(ang)));
        const double rh = i < 32 ? -in[i + 32] : in[i - 32];
        const double want = in[i] * c + rh * s;
        // cos/sin of large angles in fp32 differ from double; allow bf16-level error.
        EXPECT_NEAR(bf16_bits_to_f32(o[i]), want, 0.02 * (std::fabs(in[i]) + std::fabs(rh)) + 1e-6)
            << "t=" << t << " i=" << i;
      }
      for (int i = 64; i < 256; ++i) ASSERT_EQ(o[i], test::to_bf16({in[i]})[0]);  // pass-through
    }
  }
  // Position 0: cos = 1, sin = 0, so the vector is unchanged.
  for (int i = 0; i < 256 * H; ++i) ASSERT_EQ(bf16_bits_to_f32(x[i]), xv[i]);
}

TEST(Rope, MropeSectionsPickAxesLikeHf) {
  RopeConfig cfg;
  float c1[64], s1[64], c2[64], s2[64];
  rope_cos_sin(cfg, 10, 20, 30, c1, s1);
  // Frequency i uses T for i%3==0, H for i%3==1 (i<33), W for i%3==2 (i<30).
  for (int i = 0; i < 32; ++i) {
    const int64_t pos = (i % 3 == 1) ? 20 : (i % 3 == 2) ? 30 : 10;
    rope_cos_sin(cfg, pos, pos, pos, c2, s2);
    EXPECT_EQ(c1[i], c2[i]) << i;
    EXPECT_EQ(s1[i], s2[i]) << i;
    EXPECT_EQ(c1[i + 32], c1[i]);
  }
}

}  // namespace
}  // namespace fp4serve::kernels
