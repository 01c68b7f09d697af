// synth's fast encoders and quantizers against the reference ones in src/tensor: they must produce
// the same bytes, including on rounding ties, subnormals, saturation and zero blocks. Also the
// random generator's determinism and distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/float_formats.h"
#include "tensor/fp8_block.h"
#include "tensor/int4_gptq.h"
#include "tensor/nvfp4.h"
#include "tools/synth_quantize.h"
#include "tools/synth_random.h"

namespace fp4serve::synth {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Every representable value of a format, every midpoint between neighbours, and one fp32 ulp on
// each side of those: where rounding decisions are made.
std::vector<float> decision_points(const float* table, int count) {
  std::vector<float> values;
  for (int i = 0; i < count; ++i) {
    if (std::isfinite(table[i]) && table[i] >= 0.0f) values.push_back(table[i]);
  }
  std::sort(values.begin(), values.end());
  std::vector<float> out;
  auto around = [&](float x) {
    out.push_back(x);
    out.push_back(std::nextafter(x, 0.0f));
    out.push_back(std::nextafter(x, 1e30f));
  };
  for (size_t i = 0; i < values.size(); ++i) {
    around(values[i]);
    if (i + 1 < values.size()) around(0.5f * (values[i] + values[i + 1]));
  }
  // The tie between the largest value and the next one the format would have (saturation).
  around(values.back() + 0.5f * (values.back() - values[values.size() - 2]));
  around(values.back() * 1.5f);
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) out.push_back(-out[i]);
  return out;
}

TEST(SynthFastE4M3, MatchesReferenceAtEveryDecisionPoint) {
  for (float x : decision_points(e4m3_table(), 256)) {
    ASSERT_EQ(fast_e4m3(x), f32_to_e4m3(x)) << "x = " << x;
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, 1e-30f, -1e-30f, 1e30f, 0x1p-10f, 0x1p-9f, 0x1.8p-10f}) {
    ASSERT_EQ(fast_e4m3(x), f32_to_e4m3(x)) << "x = " << x;
  }
  EXPECT_EQ(fast_e4m3(NAN), f32_to_e4m3(NAN));
}

TEST(SynthFastE4M3, MatchesReferenceOnAStridedSweepOfAllFloatsUpTo600) {
  const uint32_t end = to_bits(600.0f);
  for (uint32_t u = 0; u < end; u += 97) {
    const float x = from_bits(u);
    ASSERT_EQ(fast_e4m3(x), f32_to_e4m3(x)) << "x = " << x;
    ASSERT_EQ(fast_e4m3(-x), f32_to_e4m3(-x)) << "x = " << -x;
  }
}

TEST(SynthFastE2M1, MatchesReferenceAtEveryDecisionPointAndOnASweep) {
  for (float x : decision_points(e2m1_table(), 16)) {
    ASSERT_EQ(fast_e2m1(x), f32_to_e2m1(x)) << "x = " << x;
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f}) {
    ASSERT_EQ(fast_e2m1(x), f32_to_e2m1(x)) << "x = " << x;
  }
  const uint32_t end = to_bits(8.0f);
  for (uint32_t u = 0; u < end; u += 101) {
    const float x = from_bits(u);
    ASSERT_EQ(fast_e2m1(x), f32_to_e2m1(x)) << "x = " << x;
    ASSERT_EQ(fast_e2m1(-x), f32_to_e2m1(-x)) << "x = " << -x;
  }
}

// Random weights with awkward features: bf16 values, a zero block, a zero row, exact multiples of
// a power of two (rounding ties after scaling), a large outlier.
std::vector<float> awkward_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_int_distribution<int> small(-12, 12);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (auto& x : w) x = bf16_to_f32(f32_to_bf16(normal(gen)));
  for (int64_t c = 0; c < 16; ++c) w[static_cast<size_t>(cols + c)] = 0.0f;                        // a zero block
  for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(2 * cols + c)] = small(gen) * 0x1p-8f;  // ties
  for (int64_t c = 0; c < cols; ++c) w[static_cast<size_t>(3 * cols + c)] = 0.0f;                  // zero row
  w[5] = 0.75f;
  return w;
}

TEST(SynthNvfp4, RowEncoderMatchesNvfp4Quantize) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const int64_t rows = 24, cols = 256;
    const auto w = awkward_matrix(rows, cols, seed);
    const Nvfp4Weight ref = nvfp4_quantize(w.data(), rows, cols);
    const float s2 = nvfp4_global_scale(abs_max(w.data(), rows * cols));
    ASSERT_EQ(to_bits(s2), to_bits(ref.global_scale));
    std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2)), scales(static_cast<size_t>(rows * cols / 16));
    for (int64_t r = 0; r < rows; ++r) {
      nvfp4_encode_row(w.data() + r * cols, cols, s2, packed.data() + r * cols / 2, scales.data() + r * cols / 16);
    }
    EXPECT_EQ(packed, ref.packed);
    EXPECT_EQ(scales, ref.block_scales);
  }
}

TEST(SynthNvfp4, AllZeroTensorMatchesReference) {
  std::vector<float> w(64, 0.0f);
  const Nvfp4Weight ref = nvfp4_quantize(w.data(), 2, 32);
  std::vector<uint8_t> packed(32), scales(4);
  for (int r = 0; r < 2; ++r) nvfp4_encode_row(w.data() + r * 32, 32, 0.0f, packed.data() + r * 16, scales.data() + r * 2);
  EXPECT_EQ(packed, ref.packed);
  EXPECT_EQ(scales, ref.block_scales);
}

TEST(SynthFp8Block, BandEncoderMatchesFp8BlockQuantize) {
  const int64_t rows = 200, cols = 300;  // partial bands and partial column blocks
  const auto w = awkward_matrix(rows, cols, 7);
  const Fp8BlockWeight ref = fp8_block_quantize(w.data(), rows, cols);
  const int64_t bc = (cols + 127) / 128;
  std::vector<uint8_t> data(static_cast<size_t>(rows * cols));
  std::vector<float> scales(static_cast<size_t>(((rows + 127) / 128) * bc));
  for (int64_t band = 0; band * 128 < rows; ++band) {
    const int64_t n = std::min<int64_t>(128, rows - band * 128);
    fp8_block_encode_band(w.data() + band * 128 * cols, n, cols, nullptr, data.data() + band * 128 * cols,
                          scales.data() + band * bc);
  }
  EXPECT_EQ(data, ref.data);
  EXPECT_EQ(scales, ref.scale_inv);
}

TEST(SynthFp8, PerTensorEncoderIsTheE4M3OfWOverScale) {
  const auto w = awkward_matrix(4, 64, 9);
  const float scale = fp8_tensor_scale(abs_max(w.data(), 256));
  EXPECT_EQ(scale, 0.75f / 448.0f);
  std::vector<uint8_t> out(256);
  fp8_encode_row(w.data(), 256, scale, out.data());
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(out[i], f32_to_e4m3(w[i] / scale)) << i;
  EXPECT_EQ(out[5], 0x7E);  // the amax maps to 448
  EXPECT_EQ(fp8_tensor_scale(0.0f), 1.0f);
}

TEST(SynthInt4, EncoderMatchesInt4GptqQuantize) {
  const int64_t rows = 32, cols = 256;
  const auto w = awkward_matrix(rows, cols, 11);
  const Int4GptqWeight ref = int4_gptq_quantize(w.data(), rows, cols, 128);
  std::vector<int32_t> qweight(static_cast<size_t>(cols / 8 * rows));
  std::vector<uint16_t> scales(static_cast<size_t>(cols / 128 * rows));
  int4_gptq_encode(w.data(), rows, cols, 128, qweight.data(), scales.data());
  EXPECT_EQ(qweight, ref.qweight);
  EXPECT_EQ(scales, ref.scales);
  EXPECT_TRUE(int4_gptq_zeros_are_symmetric(ref.qzeros.data(), static_cast<int64_t>(ref.qzeros.size())));
  EXPECT_EQ(static_cast<uint32_t>(ref.qzeros[0]), 0x77777777u);  // what synth writes as qzeros
}

TEST(SynthRandom, RowGeneratorsAreDeterministicAndDistinct) {
  auto a = Xoshiro256Plus::for_row(42, 7), b = Xoshiro256Plus::for_row(42, 7), c = Xoshiro256Plus::for_row(42, 8);
  const uint64_t first = a.next();
  EXPECT_EQ(first, b.next());
  EXPECT_NE(first, c.next());
  EXPECT_NE(name_seed(0, "a.weight"), name_seed(0, "b.weight"));
  EXPECT_NE(name_seed(0, "a.weight"), name_seed(1, "a.weight"));
  EXPECT_EQ(name_seed(3, "a.weight"), name_seed(3, "a.weight"));
}

TEST(SynthRandom, ZigguratDrawsAStandardNormal) {
  Xoshiro256Plus rng(123);
  const int n = 2'000'000;
  double sum = 0, sum2 = 0, sum4 = 0;
  int beyond2 = 0, beyond3 = 0, beyond_r = 0;
  for (int i = 0; i < n; ++i) {
    const double x = rng.normal();
    sum += x;
    sum2 += x * x;
    sum4 += x * x * x * x;
    beyond2 += std::fabs(x) > 2.0;
    beyond3 += std::fabs(x) > 3.0;
    beyond_r += std::fabs(x) > 3.6541528853610088;  // drawn by the tail algorithm
  }
  EXPECT_NEAR(sum / n, 0.0, 0.003);
  EXPECT_NEAR(sum2 / n, 1.0, 0.005);
  EXPECT_NEAR(sum4 / n, 3.0, 0.05);                                  // normal kurtosis
  EXPECT_NEAR(static_cast<double>(beyond2) / n, 0.045500, 0.0006);  // 2 * (1 - Phi(2))
  EXPECT_NEAR(static_cast<double>(beyond3) / n, 0.002700, 0.00015);
  EXPECT_NEAR(static_cast<double>(beyond_r) / n, 0.000258, 0.00005);
}

}  // namespace
}  // namespace fp4serve::synth
