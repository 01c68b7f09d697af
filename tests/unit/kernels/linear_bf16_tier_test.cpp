// The avx512_bf16 `linear` (kernel_table.h numerics contract): within a tight tolerance of the
// scalar reference for every weight format, and bit-identical to itself whatever M, the row tile,
// the N range split or the thread count. Skipped on CPUs without AVX512_BF16.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/linear_cpu.h"

namespace fp4serve::kernels {
namespace {

constexpr Isa kTier = Isa::kAvx512Bf16;

#define SKIP_WITHOUT_BF16()                                                         \
  if (!cpu::isa_supported(kTier)) GTEST_SKIP() << "CPU lacks AVX512_BF16 (" << cpu::describe_cpu() << ")"

using Kind = test::WeightKind;
using test::fits;
using test::kind_name;

const Kind kKinds[] = {Kind::kBf16,   Kind::kFp8Tensor,   Kind::kFp8BlockF32, Kind::kFp8BlockBf16,
                       Kind::kNvfp4,  Kind::kInt4Packed,  Kind::kInt4Gptq};

// |tier - scalar| <= tol * sum|x*w| for every element; x must hold bf16 values.
void expect_within_tolerance(const std::vector<float>& x, int64_t M, const WeightView& w, const std::string& what) {
  std::vector<float> ref(M * w.n), got(M * w.n, -7.0f);
  linear(x.data(), M, w, ref.data(), Isa::kScalar);
  linear(x.data(), M, w, got.data(), kTier);
  const std::vector<float> dense = dequantize_full(w);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < w.n; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < w.k; ++k) mag += std::fabs(double(x[m * w.k + k]) * dense[n * w.k + k]);
      ASSERT_NEAR(got[m * w.n + n], ref[m * w.n + n], test::kBf16TierRelTol * mag + test::kBf16TierAbsTol)
          << what << " m=" << m << " n=" << n;
    }
}

TEST(LinearBf16Tier, EveryFormatWithinToleranceOfScalarIncludingTails) {
  SKIP_WITHOUT_BF16();
  // K and N tails: K not a multiple of 32 / 64 / 256, single rows, row counts off the 4/8 tiles;
  // M on both sides of the register (<= 4) / scratch-tile (> 4) switch.
  const int64_t Ks[] = {1, 16, 31, 48, 100, 128, 272, 384, 1000, 2064};
  const int64_t Ns[] = {1, 7, 13};
  const int64_t Ms[] = {1, 2, 3, 4, 5, 9};
  uint32_t seed = 100;
  for (Kind f : kKinds)
    for (int64_t K : Ks) {
      if (!fits(f, K)) continue;
      for (int64_t N : Ns)
        for (int64_t M : Ms) {
          test::RandomWeight w = test::make_random_weight(f, N, K, ++seed);
          const auto x = test::random_bf16_values(M * K, ++seed);
          expect_within_tolerance(x, M, w.view,
                                  std::string(kind_name(f)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                      " K=" + std::to_string(K));
          if (HasFatalFailure()) return;
        }
    }
}

TEST(LinearBf16Tier, LargeExpertShapesWithinTolerance) {
  SKIP_WITHOUT_BF16();
  for (Kind f : {Kind::kNvfp4, Kind::kFp8BlockBf16, Kind::kBf16}) {
    test::RandomWeight w = test::make_random_weight(f, 64, 2048, 7);
    expect_within_tolerance(test::random_bf16_values(2 * 2048, 8), 2, w.view, kind_name(f));
    test::RandomWeight d = test::make_random_weight(f, 33, 512, 9);
    expect_within_tolerance(test::random_bf16_values(6 * 512, 10), 6, d.view, kind_name(f));
  }
}

// Small integers: every product and partial sum is exact in fp32, so any order gives the same
// bits. Catches layout mistakes (wrong k paired with wrong weight) exactly.
TEST(LinearBf16Tier, ExactOnSmallIntegerProblems) {
  SKIP_WITHOUT_BF16();
  const int64_t N = 11, K = 272;
  // NVFP4 with scale 1.0 (0x38): weights are the e2m1 values; x small integers.
  std::vector<uint8_t> packed = test::random_bytes(N * K / 2, 3), scales(N * K / 16, 0x38);
  for (size_t i = 0; i < scales.size(); i += 3) scales[i] = 0x40;  // 2.0 on some blocks
  const WeightView nv = nvfp4_weight(packed.data(), scales.data(), 1.0f, N, K);
  std::vector<float> x(5 * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7 % 9) - 4);
  for (int64_t M : {1, 5}) {
    std::vector<float> ref(M * N), got(M * N);
    linear(x.data(), M, nv, ref.data(), Isa::kScalar);
    linear(x.data(), M, nv, got.data(), kTier);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "nvfp4 M=" << M << " i=" << i;
  }
  // BF16 weights that are small integers, K with a 32-tail.
  const int64_t K2 = 77;
  std::vector<uint16_t> wb(N * K2);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = f32_to_bf16_bits(static_cast<float>(static_cast<int>(i % 5) - 2));
  const WeightView bv = bf16_weight(wb.data(), N, K2);
  for (int64_t M : {1, 5}) {
    std::vector<float> ref(M * N), got(M * N);
    linear(x.data(), M, K2, bv, ref.data(), N, Isa::kScalar);
    linear(x.data(), M, K2, bv, got.data(), N, kTier);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "bf16 M=" << M << " i=" << i;
  }
}

TEST(LinearBf16Tier, BitIdenticalWhateverMTileNSplitAndThreads) {
  SKIP_WITHOUT_BF16();
  const int64_t N = 45, K = 784;  // K: 3 full 256-groups + a 16-wide tail (nvfp4); N off every tile
  for (Kind f : kKinds) {
    const int64_t k = fits(f, K) ? K : 768;
    SCOPED_TRACE(kind_name(f));
    test::RandomWeight w = test::make_random_weight(f, N, k, 55);
    const int64_t M = 21;
    const auto x = test::random_bf16_values(M * k, 56);
    std::vector<float> all(M * N);
    cpu::set_num_threads(2);
    linear(x.data(), M, w.view, all.data(), kTier);
    cpu::set_num_threads(1);
    std::vector<float> one_thread(M * N);
    linear(x.data(), M, w.view, one_thread.data(), kTier);
    cpu::set_num_threads(0);
    for (size_t i = 0; i < all.size(); ++i) ASSERT_TRUE(test::same_bits(all[i], one_thread[i])) << i;
    // Rows alone and in batches of every size across the register/scratch switch.
    for (int64_t m0 : {0, 3, 20})
      for (int64_t mm : {1, 2, 3, 4, 5, 8}) {
        if (m0 + mm > M) continue;
        std::vector<float> y(mm * N);
        linear(x.data() + m0 * k, mm, w.view, y.data(), kTier);
        for (int64_t i = 0; i < mm * N; ++i)
          ASSERT_TRUE(test::same_bits(y[i], all[m0 * N + i])) << "m0=" << m0 << " M=" << mm << " i=" << i;
      }
    // The kernel on odd N ranges (how linear_batch splits work between threads).
    const cpu::KernelTable& kt = cpu::kernel_table(kTier);
    std::vector<float> scratch(cpu::linear_scratch_floats(M, k));
    for (int64_t mm : {1, 6}) {
      std::vector<float> y(mm * N, -1.0f);
      const int64_t cuts[] = {0, 1, 6, 13, 14, 31, N};
      for (size_t c = 0; c + 1 < std::size(cuts); ++c)
        kt.linear(x.data(), mm, k, w.view, cuts[c], cuts[c + 1], y.data(), N, scratch.data());
      for (int64_t i = 0; i < mm * N; ++i) ASSERT_TRUE(test::same_bits(y[i], all[i])) << "split M=" << mm << " i=" << i;
    }
  }
}

TEST(LinearBf16Tier, SubnormalZeroAndNegativeZeroBlockScales) {
  SKIP_WITHOUT_BF16();
  const int64_t N = 9, K = 320;
  for (int64_t M : {1, 6}) {
    // Scales drawn from zero, every subnormal e4m3 code and the smallest normals.
    test::RandomWeight w = test::make_random_weight(Kind::kNvfp4, N, K, 31, 0x00, 0x0A);
    for (size_t i = 0; i < w.u8b.size(); i += 5) w.u8b[i] = 0x80;  // -0 scale
    expect_within_tolerance(test::random_bf16_values(M * K, 32), M, w.view, "nvfp4 tiny scales");
  }
  // One block, exact expectation: subnormal scale 0x03 = 3 * 2^-9, nibbles all 1 (0.5), x = 1.
  std::vector<uint8_t> packed(8, 0x11), sc(1, 0x03);
  const WeightView one = nvfp4_weight(packed.data(), sc.data(), 1.0f, 1, 16);
  std::vector<float> x(16, 1.0f);
  float y = 0;
  linear(x.data(), 1, one, &y, kTier);
  EXPECT_EQ(y, 16 * 0.5f * 3.0f * std::ldexp(1.0f, -9));
  // FP8 weights with subnormal codes (exponent field 0): exact, x = 1.
  std::vector<uint8_t> f8 = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x81, 0x08, 0x00};
  const WeightView fw = fp8_tensor_weight(f8.data(), 1.0f, 1, static_cast<int64_t>(f8.size()));
  std::vector<float> ones(f8.size(), 1.0f);
  float ref = 0, got = 0;
  linear(ones.data(), 1, fw, &ref, Isa::kScalar);
  linear(ones.data(), 1, fw, &got, kTier);
  EXPECT_EQ(got, ref);
  EXPECT_EQ(got, (1 + 2 + 3 + 4 + 5 + 6 + 7 - 1 + 8) * std::ldexp(1.0f, -9));
}

TEST(LinearBf16Tier, NegativeZeroInputsGivePositiveZeroLikeScalar) {
  SKIP_WITHOUT_BF16();
  const int64_t N = 5, K = 96;
  for (Kind f : {Kind::kBf16, Kind::kFp8Tensor, Kind::kNvfp4}) {
    test::RandomWeight w = test::make_random_weight(f, N, K, 41);
    for (int64_t M : {1, 5}) {
      std::vector<float> x(M * K, -0.0f), ref(M * N), got(M * N);
      linear(x.data(), M, w.view, ref.data(), Isa::kScalar);
      linear(x.data(), M, w.view, got.data(), kTier);
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_TRUE(test::same_bits(got[i], ref[i])) << kind_name(f) << " " << got[i] << " vs " << ref[i];
        EXPECT_FALSE(std::signbit(got[i]));
      }
    }
  }
  // Negative-zero weights (e2m1 code 8, e4m3 0x80) against ordinary x.
  std::vector<uint8_t> packed(N * K / 2, 0x88), sc(N * K / 16, 0x38);
  const WeightView nz = nvfp4_weight(packed.data(), sc.data(), 1.0f, N, K);
  const auto x = test::random_bf16_values(K, 42);
  std::vector<float> y(N, 1.0f);
  linear(x.data(), 1, nz, y.data(), kTier);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(LinearBf16Tier, Fp32ActivationsAreRoundedToBf16Once) {
  SKIP_WITHOUT_BF16();
  const int64_t N = 12, K = 200;
  test::RandomWeight w = test::make_random_weight(Kind::kBf16, N, K, 61);
  auto x = test::random_f32(3 * K, 62);  // not bf16 values
  auto xr = x;
  for (auto& v : xr) v = round_bf16(v);
  std::vector<float> got(3 * N), got_r(3 * N);
  linear(x.data(), 3, w.view, got.data(), kTier);
  linear(xr.data(), 3, w.view, got_r.data(), kTier);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(test::same_bits(got[i], got_r[i])) << i;
  expect_within_tolerance(xr, 3, w.view, "rounded x");
}

TEST(LinearBf16Tier, IsTheDefaultWhereSupportedAndCanBeNamed) {
  SKIP_WITHOUT_BF16();
  EXPECT_EQ(cpu::parse_isa("avx512_bf16"), kTier);
  EXPECT_EQ(cpu::isa_name(kTier), "avx512_bf16");
  // The best tier unless this CPU also runs the amx tier (which builds on this one).
  EXPECT_EQ(cpu::supported_isas().back(), cpu::isa_supported(Isa::kAmx) ? Isa::kAmx : kTier);
  EXPECT_TRUE(cpu::isa_supported(Isa::kAvx512));
}

}  // namespace
}  // namespace fp4serve::kernels
