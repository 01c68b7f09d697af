#include "kernels/cpu/linear_cpu.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/thread_pool.h"

namespace fp4serve::kernels {
namespace {

using test::isas;
using test::same_bits;

using test::RandomWeight;

// A random weight of `f` (FP8 block with fp32 scale_inv).
RandomWeight make_weight(WeightLayout f, int64_t n, int64_t k, uint32_t seed) {
  using Kind = test::WeightKind;
  switch (f) {
    case WeightLayout::kBf16: return test::make_random_weight(Kind::kBf16, n, k, seed);
    case WeightLayout::kFp8Tensor: return test::make_random_weight(Kind::kFp8Tensor, n, k, seed);
    case WeightLayout::kFp8Block: return test::make_random_weight(Kind::kFp8BlockF32, n, k, seed);
    case WeightLayout::kNvfp4: return test::make_random_weight(Kind::kNvfp4, n, k, seed);
    case WeightLayout::kInt4Gptq: return test::make_random_weight(Kind::kInt4Gptq, n, k, seed);
    case WeightLayout::kInt4Packed: return test::make_random_weight(Kind::kInt4Packed, n, k, seed);
  }
  throw std::invalid_argument("make_weight: unknown format");
}

struct Shape {
  int64_t m, n, k;
};

const WeightLayout kFormats[] = {WeightLayout::kBf16,  WeightLayout::kFp8Tensor, WeightLayout::kFp8Block,
                                 WeightLayout::kNvfp4, WeightLayout::kInt4Gptq,  WeightLayout::kInt4Packed};

bool fits(WeightLayout f, int64_t k) {
  if (f == WeightLayout::kNvfp4) return k % 16 == 0;
  if (f == WeightLayout::kInt4Gptq || f == WeightLayout::kInt4Packed) return k % 128 == 0;
  return true;
}

TEST(Linear, EveryPathMatchesScalarBitForBitAndDoubleWithinTolerance) {
  const Shape shapes[] = {{1, 37, 256}, {2, 16, 128}, {3, 9, 48}, {5, 20, 272}, {17, 33, 384}, {64, 24, 512},
                          {1, 130, 2048}, {4, 8, 1000}};
  uint32_t seed = 1;
  for (WeightLayout f : kFormats) {
    for (const Shape& s : shapes) {
      if (!fits(f, s.k)) continue;
      SCOPED_TRACE(std::string(weight_layout_name(f)) + " M=" + std::to_string(s.m) + " N=" +
                   std::to_string(s.n) + " K=" + std::to_string(s.k));
      RandomWeight w = make_weight(f, s.n, s.k, ++seed);
      const auto x = test::random_bf16_values(s.m * s.k, ++seed);
      std::vector<float> ref(s.m * s.n);
      linear(x.data(), s.m, w.view, ref.data(), Isa::kScalar);
      // Double-precision formula on the dequantized matrix.
      const std::vector<float> dense = dequantize_full(w.view);
      std::vector<double> mags(s.m * s.n);
      for (int64_t m = 0; m < s.m; ++m) {
        for (int64_t n = 0; n < s.n; ++n) {
          double sum = 0, mag = 0;
          for (int64_t k = 0; k < s.k; ++k) {
            sum += static_cast<double>(x[m * s.k + k]) * dense[n * s.k + k];
            mag += std::fabs(static_cast<double>(x[m * s.k + k]) * dense[n * s.k + k]);
          }
          mags[m * s.n + n] = mag;
          ASSERT_NEAR(ref[m * s.n + n], sum, 2e-6 * mag + 1e-30) << "m=" << m << " n=" << n;
        }
      }
      for (Isa isa : isas()) {
        std::vector<float> y(s.m * s.n, -1.0f);
        linear(x.data(), s.m, w.view, y.data(), isa);
        for (size_t i = 0; i < y.size(); ++i) {
          if (test::bit_exact_with_scalar(isa))
            ASSERT_TRUE(same_bits(y[i], ref[i])) << cpu::isa_name(isa) << " i=" << i << " " << y[i] << " vs " << ref[i];
          else
            ASSERT_NEAR(y[i], ref[i], test::kBf16TierRelTol * mags[i] + test::kBf16TierAbsTol)
                << cpu::isa_name(isa) << " i=" << i;
        }
      }
    }
  }
}

TEST(Linear, RowResultIndependentOfBatchSizeAndThreads) {
  const int64_t N = 70, K = 512;
  for (WeightLayout f : kFormats) {
    RandomWeight w = make_weight(f, N, K, 77);
    const auto x = test::random_bf16_values(64 * K, 78);
    for (Isa isa : isas()) {
      SCOPED_TRACE(std::string(weight_layout_name(f)) + " " + std::string(cpu::isa_name(isa)));
      std::vector<float> batch(64 * N);
      cpu::set_num_threads(2);
      linear(x.data(), 64, w.view, batch.data(), isa);
      cpu::set_num_threads(1);
      std::vector<float> one_thread(64 * N);
      linear(x.data(), 64, w.view, one_thread.data(), isa);
      cpu::set_num_threads(0);
      for (size_t i = 0; i < batch.size(); ++i) ASSERT_TRUE(same_bits(batch[i], one_thread[i]));
      for (int64_t m : {0, 5, 63}) {
        for (int64_t mm : {1, 3, 7}) {  // row m alone and inside batches of other sizes
          if (m + mm > 64) continue;
          std::vector<float> y(mm * N);
          linear(x.data() + m * K, mm, w.view, y.data(), isa);
          for (int64_t n = 0; n < N; ++n) ASSERT_TRUE(same_bits(y[n], batch[m * N + n]));
        }
      }
    }
  }
}

TEST(Linear, BatchOfJobsEqualsSeparateCalls) {
  RandomWeight a = make_weight(WeightLayout::kNvfp4, 40, 256, 5);
  RandomWeight b = make_weight(WeightLayout::kBf16, 24, 128, 6);
  const auto xa = test::random_bf16_values(3 * 256, 7);
  const auto xb = test::random_bf16_values(2 * 128, 8);
  std::vector<float> ya(3 * 40), yb(2 * 24), ra(3 * 40), rb(2 * 24);
  linear_batch({{xa.data(), 3, 256, a.view, ya.data(), 40}, {xb.data(), 2, 128, b.view, yb.data(), 24}});
  linear(xa.data(), 3, a.view, ra.data());
  linear(xb.data(), 2, b.view, rb.data());
  for (size_t i = 0; i < ya.size(); ++i) ASSERT_TRUE(same_bits(ya[i], ra[i]));
  for (size_t i = 0; i < yb.size(); ++i) ASSERT_TRUE(same_bits(yb[i], rb[i]));
}

TEST(Linear, Int4RepackKeepsValues) {
  RandomWeight g = make_weight(WeightLayout::kInt4Gptq, 12, 256, 9);
  Int4Packed p = int4_repack(g.view);
  EXPECT_EQ(dequantize_full(g.view), dequantize_full(p.view()));
}

TEST(Linear, Nvfp4DequantMatchesSpecFormula) {
  // docs/quant-formats.md §1.2/§1.3: element 2j in the low nibble of byte j; W = e2m1 * e4m3 * scale_2.
  const uint8_t packed[8] = {0x21, 0xF7, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9A};
  const uint8_t scales[1] = {0x38};  // e4m3 1.0
  WeightView w = nvfp4_weight(packed, scales, 0.5f, 1, 16);
  auto d = dequantize_full(w);
  EXPECT_EQ(d[0], 0.5f * 0.5f);   // nibble 1 = 0.5
  EXPECT_EQ(d[1], 1.0f * 0.5f);   // nibble 2 = 1
  EXPECT_EQ(d[2], 6.0f * 0.5f);   // nibble 7 = 6
  EXPECT_EQ(d[3], -6.0f * 0.5f);  // nibble F = -6
  EXPECT_EQ(d[14], -1.0f * 0.5f); // nibble A = -1
  EXPECT_EQ(d[15], -0.5f * 0.5f); // nibble 9 = -0.5
}

TEST(Linear, SliceRowsSelectsTheSameRows) {
  RandomWeight w = make_weight(WeightLayout::kInt4Gptq, 16, 128, 11);
  auto full = dequantize_full(w.view);
  auto part = dequantize_full(slice_rows(w.view, 4, 8));
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t k = 0; k < 128; ++k) ASSERT_EQ(part[r * 128 + k], full[(r + 4) * 128 + k]);
  EXPECT_THROW(slice_rows(w.view, 10, 8), WeightLayoutError);
}

TEST(Linear, BadShapesAreRejectedWithTheTensorNamed) {
  uint8_t b[8] = {};
  try {
    nvfp4_weight(b, b, 1.0f, 1, 15, "layers.0.mlp.experts.3.up_proj");
    FAIL();
  } catch (const WeightLayoutError& e) {
    EXPECT_NE(std::string(e.what()).find("experts.3.up_proj"), std::string::npos);
  }
}

}  // namespace
}  // namespace fp4serve::kernels
