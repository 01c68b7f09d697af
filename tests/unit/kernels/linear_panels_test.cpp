// Packed panels (packed_weight.h) and the panel kernels of the avx512_bf16 and amx tiers: the packer
// moves every code to its documented place, and each panel kernel is within the bf16 tiers'
// tolerance of scalar on the plain view and bit-identical to itself whatever M (across its
// register / scratch / AMX tile paths), the panel split or the thread count. Tiers without a panel
// kernel on this CPU are skipped by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/cpu/packed_weight.h"

namespace fp4serve::kernels {
namespace {

using Kind = test::WeightKind;
using test::kind_name;

const Kind kPackable[] = {Kind::kBf16, Kind::kFp8Tensor, Kind::kFp8BlockF32, Kind::kFp8BlockBf16, Kind::kNvfp4};

// The tiers this CPU runs that have a panel kernel.
std::vector<Isa> panel_tiers() {
  std::vector<Isa> out;
  for (Isa i : cpu::supported_isas())
    if (cpu::kernel_table(i).linear_packed != nullptr) out.push_back(i);
  return out;
}

struct Packed {
  test::RandomWeight w;
  PackedWeight p;
  WeightView view;  // w.view with p attached
};

Packed make_packed(Kind f, int64_t n, int64_t k, uint32_t seed, int scale_lo = 0x01, int scale_hi = 0x5F) {
  Packed r{test::make_random_weight(f, n, k, seed, scale_lo, scale_hi), {}, {}};
  r.p = pack_weight(r.w.view);
  r.view = with_packed(r.w.view, r.p);
  return r;
}

// |tier - scalar| <= tol * sum|x*w| for every element (x holds bf16 values).
void expect_within_tolerance(const std::vector<float>& x, int64_t M, const Packed& w, Isa tier, const std::string& what) {
  std::vector<float> ref(M * w.view.n), got(M * w.view.n, -7.0f);
  linear(x.data(), M, w.w.view, ref.data(), Isa::kScalar);
  linear(x.data(), M, w.view, got.data(), tier);
  const std::vector<float> dense = dequantize_full(w.w.view);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < w.view.n; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < w.view.k; ++k) mag += std::fabs(double(x[m * w.view.k + k]) * dense[n * w.view.k + k]);
      ASSERT_NEAR(got[m * w.view.n + n], ref[m * w.view.n + n], test::kBf16TierRelTol * mag + test::kBf16TierAbsTol)
          << what << " " << cpu::isa_name(tier) << " m=" << m << " n=" << n;
    }
}

TEST(PackedWeight, UnpacksToTheViewsValuesForEveryFormatAndTail) {
  for (Kind f : kPackable)
    for (int64_t n : {1, 15, 16, 17, 40})
      for (int64_t k : {16, 48, 64, 80, 200, 272}) {
        if (!test::fits(f, k)) continue;
        const Packed w = make_packed(f, n, k, static_cast<uint32_t>(n * 1000 + k));
        ASSERT_EQ(w.p.kp % kPanelKAlign, 0);
        ASSERT_EQ(w.p.panels, (n + 15) / 16);
        std::vector<float> want(n * k), got(n * k);
        dequantize_rows_unscaled(w.w.view, 0, n, want.data());
        unpack_rows_unscaled(w.p, 0, n, got.data());
        for (int64_t i = 0; i < n * k; ++i)
          ASSERT_TRUE(test::same_bits(got[i], want[i])) << kind_name(f) << " n=" << n << " k=" << k << " i=" << i;
      }
}

TEST(PackedWeight, FastPackingOfFullPanelsEqualsTheDefinition) {
  for (Kind f : kPackable)
    for (int64_t k : {64, 128, 640}) {
      const test::RandomWeight w = test::make_random_weight(f, 48, k, static_cast<uint32_t>(k + 7));
      for (int64_t panel : {0, 2})
        ASSERT_EQ(pack_panel_for_test(w.view, panel, false), pack_panel_for_test(w.view, panel, true))
            << kind_name(f) << " k=" << k << " panel " << panel;
    }
}

TEST(PackedWeight, LargeWeightsAreHugePageMappedAndFreed) {
  // 8 MB of panels: above the size that gets its own mapping; the values survive the round trip.
  const Packed w = make_packed(Kind::kFp8Tensor, 2048, 4096, 12);
  EXPECT_GE(w.p.size_bytes(), int64_t{4} << 20);
  std::vector<float> want(4 * 4096), got(4 * 4096);
  dequantize_rows_unscaled(w.w.view, 2040, 2044, want.data());
  unpack_rows_unscaled(w.p, 2040, 2044, got.data());
  EXPECT_EQ(want, got);
}

TEST(PackedWeight, RefusesFormatsWithoutAPanelLayoutAndMismatchedViews) {
  const test::RandomWeight gptq = test::make_random_weight(Kind::kInt4Gptq, 8, 128, 1);
  EXPECT_FALSE(packable(gptq.view));
  EXPECT_THROW(pack_weight(gptq.view), WeightLayoutError);
  const Packed a = make_packed(Kind::kBf16, 8, 64, 2);
  const test::RandomWeight other = test::make_random_weight(Kind::kBf16, 9, 64, 3);
  EXPECT_THROW(with_packed(other.view, a.p), WeightLayoutError);
  // A row slice drops the packed form (its panels would not start at the slice).
  EXPECT_EQ(slice_rows(a.view, 1, 4).packed, nullptr);
}

TEST(LinearPanels, EveryFormatWithinToleranceOfScalarIncludingTails) {
  const auto tiers = panel_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no panel kernel on this CPU (" << cpu::describe_cpu() << ")";
  // K and N tails around the 64-k padding and 16-row panels; M on both sides of every path switch
  // (4: registers / scratch in avx512_bf16; 16: one tile / tile sweep in amx, 32: two tiles).
  const int64_t Ks[] = {16, 48, 100, 128, 272, 1000, 2064};
  const int64_t Ns[] = {1, 13, 16, 33};
  const int64_t Ms[] = {1, 2, 4, 5, 16, 17, 33};
  uint32_t seed = 500;
  for (Isa tier : tiers)
    for (Kind f : kPackable)
      for (int64_t K : Ks) {
        if (!test::fits(f, K)) continue;
        for (int64_t N : Ns)
          for (int64_t M : Ms) {
            const Packed w = make_packed(f, N, K, ++seed);
            expect_within_tolerance(test::random_bf16_values(M * K, ++seed), M, w, tier,
                                    std::string(kind_name(f)) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                        " K=" + std::to_string(K));
            if (HasFatalFailure()) return;
          }
      }
}

TEST(LinearPanels, ModelShapesWithinTolerance) {
  const auto tiers = panel_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no panel kernel on this CPU";
  for (Isa tier : tiers)
    for (Kind f : {Kind::kNvfp4, Kind::kFp8Tensor, Kind::kFp8BlockBf16, Kind::kBf16}) {
      const Packed w = make_packed(f, 64, 4096, 7);
      expect_within_tolerance(test::random_bf16_values(3 * 4096, 8), 3, w, tier, kind_name(f));
      const Packed d = make_packed(f, 48, 2048, 9);
      expect_within_tolerance(test::random_bf16_values(40 * 2048, 10), 40, d, tier, kind_name(f));
    }
}

// Small integers: every product and partial sum is exact in fp32, so any order gives the bits of
// scalar. Catches a weight paired with the wrong x or the wrong row exactly.
TEST(LinearPanels, ExactOnSmallIntegerProblems) {
  const auto tiers = panel_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no panel kernel on this CPU";
  const int64_t N = 21, K = 272;
  std::vector<uint8_t> packed = test::random_bytes(N * K / 2, 3), scales(N * K / 16, 0x38);
  for (size_t i = 0; i < scales.size(); i += 3) scales[i] = 0x40;  // 2.0 on some blocks
  const WeightView nv = nvfp4_weight(packed.data(), scales.data(), 1.0f, N, K);
  std::vector<uint8_t> f8(N * K);
  for (size_t i = 0; i < f8.size(); ++i) f8[i] = f32_to_e4m3(static_cast<float>(static_cast<int>(i * 5 % 7) - 3));
  const WeightView fv = fp8_tensor_weight(f8.data(), 1.0f, N, K);
  std::vector<uint16_t> wb(N * K);
  for (size_t i = 0; i < wb.size(); ++i) wb[i] = f32_to_bf16_bits(static_cast<float>(static_cast<int>(i % 5) - 2));
  const WeightView bv = bf16_weight(wb.data(), N, K);
  std::vector<float> x(40 * K);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 7 % 9) - 4);
  for (const WeightView& v : {nv, fv, bv}) {
    const PackedWeight p = pack_weight(v);
    const WeightView pv = with_packed(v, p);
    for (Isa tier : tiers)
      for (int64_t M : {1, 5, 17, 40}) {
        std::vector<float> ref(M * N), got(M * N);
        linear(x.data(), M, v, ref.data(), Isa::kScalar);
        linear(x.data(), M, pv, got.data(), tier);
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_EQ(got[i], ref[i]) << weight_layout_name(v.format) << " " << cpu::isa_name(tier) << " M=" << M
                                    << " i=" << i;
      }
  }
}

TEST(LinearPanels, BitIdenticalWhateverMPanelSplitAndThreads) {
  const auto tiers = panel_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no panel kernel on this CPU";
  const int64_t N = 75, K = 784;  // N: 4 full panels + a partial one; K: a 16-k tail past 768
  for (Isa tier : tiers)
    for (Kind f : kPackable) {
      SCOPED_TRACE(std::string(kind_name(f)) + " " + std::string(cpu::isa_name(tier)));
      const Packed w = make_packed(f, N, K, 55);
      const int64_t M = 37;
      const auto x = test::random_bf16_values(M * K, 56);
      std::vector<float> all(M * N), one_thread(M * N);
      cpu::set_num_threads(2);
      linear(x.data(), M, w.view, all.data(), tier);
      cpu::set_num_threads(1);
      linear(x.data(), M, w.view, one_thread.data(), tier);
      cpu::set_num_threads(0);
      for (size_t i = 0; i < all.size(); ++i) ASSERT_TRUE(test::same_bits(all[i], one_thread[i])) << i;
      // Rows alone and in batches of every size across the path switches.
      for (int64_t m0 : {0, 3, 20})
        for (int64_t mm : {1, 2, 3, 4, 5, 8, 16, 17}) {
          if (m0 + mm > M) continue;
          std::vector<float> y(mm * N);
          linear(x.data() + m0 * K, mm, w.view, y.data(), tier);
          for (int64_t i = 0; i < mm * N; ++i)
            ASSERT_TRUE(test::same_bits(y[i], all[m0 * N + i])) << "m0=" << m0 << " M=" << mm << " i=" << i;
        }
      // The kernel on panel ranges (how linear_batch splits work between threads).
      const cpu::KernelTable& kt = cpu::kernel_table(tier);
      for (int64_t mm : {1, 6, 20}) {
        std::vector<float> scratch(cpu::packed_linear_scratch_floats(mm, w.p.kp));
        std::vector<float> y(mm * N, -1.0f);
        const int64_t cuts[] = {0, 16, 48, 64, N};
        for (size_t c = 0; c + 1 < std::size(cuts); ++c)
          kt.linear_packed(x.data(), mm, K, w.p, cuts[c], cuts[c + 1], y.data(), N, scratch.data());
        for (int64_t i = 0; i < mm * N; ++i)
          ASSERT_TRUE(test::same_bits(y[i], all[i])) << "split M=" << mm << " i=" << i;
      }
    }
}

TEST(LinearPanels, SubnormalScalesAndCodesAreExact) {
  const auto tiers = panel_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no panel kernel on this CPU";
  // NVFP4 block scales from zero, every subnormal e4m3 code and the smallest normals, and -0.
  for (Isa tier : tiers)
    for (int64_t M : {1, 6, 20}) {
      Packed w = make_packed(Kind::kNvfp4, 9, 320, 31, 0x00, 0x0A);
      for (size_t i = 0; i < w.w.u8b.size(); i += 5) w.w.u8b[i] = 0x80;
      w.p = pack_weight(w.w.view);
      w.view = with_packed(w.w.view, w.p);
      expect_within_tolerance(test::random_bf16_values(M * 320, 32), M, w, tier, "nvfp4 tiny scales");
    }
  // One block, exact: subnormal scale 0x03 = 3 * 2^-9, nibbles all 1 (0.5), x = 1.
  std::vector<uint8_t> packed(8, 0x11), sc(1, 0x03);
  const WeightView one = nvfp4_weight(packed.data(), sc.data(), 1.0f, 1, 16);
  const PackedWeight po = pack_weight(one);
  // FP8 weights with subnormal codes (exponent field 0) and -0: exact, x = 1.
  std::vector<uint8_t> f8 = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x81, 0x08, 0x00, 0x80};
  const WeightView fw = fp8_tensor_weight(f8.data(), 1.0f, 1, static_cast<int64_t>(f8.size()));
  const PackedWeight pf = pack_weight(fw);
  std::vector<float> ones(16, 1.0f);
  for (Isa tier : tiers) {
    float y = 0;
    linear(ones.data(), 1, with_packed(one, po), &y, tier);
    EXPECT_EQ(y, 16 * 0.5f * 3.0f * std::ldexp(1.0f, -9)) << cpu::isa_name(tier);
    linear(ones.data(), 1, with_packed(fw, pf), &y, tier);
    EXPECT_EQ(y, (1 + 2 + 3 + 4 + 5 + 6 + 7 - 1 + 8) * std::ldexp(1.0f, -9)) << cpu::isa_name(tier);
  }
}

TEST(LinearPanels, NormalScalePanelsConvertScalesTheShortWayWithTheSameBits) {
  const auto tiers = panel_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no panel kernel on this CPU";
  // Scales 0x08..0x5F: all positive normal codes, so every panel is flagged for the short path.
  Packed w = make_packed(Kind::kNvfp4, 40, 576, 91, 0x08, 0x5F);
  for (uint8_t f : w.p.normal_scales) ASSERT_EQ(f, 1);
  // A zero scale anywhere in a panel sends that panel (only) down the exact path.
  Packed z = make_packed(Kind::kNvfp4, 40, 576, 91, 0x08, 0x5F);
  z.w.u8b[16 * 36 + 3] = 0x00;  // row 16 (panel 1), block 3
  z.p = pack_weight(z.w.view);
  z.view = with_packed(z.w.view, z.p);
  EXPECT_EQ(z.p.normal_scales, (std::vector<uint8_t>{1, 0, 1}));
  for (Isa tier : tiers)
    for (int64_t M : {1, 3, 20}) {
      const auto x = test::random_bf16_values(M * 576, 92);
      std::vector<float> fast(M * 40), exact(M * 40);
      linear(x.data(), M, w.view, fast.data(), tier);
      PackedWeight slow = pack_weight(w.w.view);
      std::fill(slow.normal_scales.begin(), slow.normal_scales.end(), 0);
      linear(x.data(), M, with_packed(w.w.view, slow), exact.data(), tier);
      for (size_t i = 0; i < fast.size(); ++i) ASSERT_TRUE(test::same_bits(fast[i], exact[i])) << cpu::isa_name(tier) << " " << i;
      expect_within_tolerance(x, M, w, tier, "nvfp4 normal scales");
      expect_within_tolerance(x, M, z, tier, "nvfp4 one zero scale");
    }
}

TEST(LinearPanels, NegativeZeroInputsGivePositiveZero) {
  const auto tiers = panel_tiers();
  if (tiers.empty()) GTEST_SKIP() << "no panel kernel on this CPU";
  for (Isa tier : tiers)
    for (Kind f : {Kind::kBf16, Kind::kFp8Tensor, Kind::kFp8BlockF32, Kind::kNvfp4})
      for (int64_t M : {1, 5, 17}) {
        const Packed w = make_packed(f, 5, 96, 41);
        std::vector<float> x(M * 96, -0.0f), y(M * 5, 1.0f);
        linear(x.data(), M, w.view, y.data(), tier);
        for (float v : y) {
          EXPECT_EQ(v, 0.0f) << kind_name(f) << " " << cpu::isa_name(tier);
          EXPECT_FALSE(std::signbit(v)) << kind_name(f) << " " << cpu::isa_name(tier) << " M=" << M;
        }
      }
}

TEST(LinearPanels, TiersWithoutAPanelKernelReadThePlainView) {
  // A packed view through the fp32 tiers gives their own bits (the packed form is ignored).
  const Packed w = make_packed(Kind::kNvfp4, 20, 128, 71);
  const auto x = test::random_bf16_values(3 * 128, 72);
  for (Isa isa : cpu::supported_isas()) {
    if (cpu::kernel_table(isa).linear_packed != nullptr) continue;
    std::vector<float> plain(3 * 20), packed(3 * 20);
    linear(x.data(), 3, w.w.view, plain.data(), isa);
    linear(x.data(), 3, w.view, packed.data(), isa);
    for (size_t i = 0; i < plain.size(); ++i) ASSERT_TRUE(test::same_bits(plain[i], packed[i])) << cpu::isa_name(isa);
  }
}

}  // namespace
}  // namespace fp4serve::kernels
