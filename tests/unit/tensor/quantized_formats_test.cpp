// NVFP4, block FP8 and INT4 GPTQ packing: the worked examples of docs/quant-formats.md §6 and
// round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/float_formats.h"
#include "tensor/fp8_block.h"
#include "tensor/int4_gptq.h"
#include "tensor/nvfp4.h"

namespace fp4serve {
namespace {

TEST(Nvfp4, SpecExample61DecodesByte0x2F) {
  // low nibble F -> element 0 = -6; high nibble 2 -> element 1 = +1; scale 0x38 = 1.0
  std::vector<uint8_t> packed(8, 0), scales(1, 0x38);
  packed[0] = 0x2F;
  const float g = 1.0f / (448.0f * 6.0f);
  std::vector<float> out(16);
  nvfp4_dequantize(packed.data(), scales.data(), g, 1, 16, out.data());
  EXPECT_EQ(out[0], -6.0f * g);
  EXPECT_EQ(out[1], 1.0f * g);
  uint32_t bits;
  std::memcpy(&bits, &out[0], 4);
  EXPECT_EQ(bits, 0xBB124925u);
  EXPECT_EQ(f32_to_bf16(out[0]), 0xBB12);
}

TEST(Nvfp4, SpecExample63QuantizesLikeModelOpt) {
  // A 16-element block in a tensor whose amax is 0.5 (the 0.5 sits in a second row).
  std::vector<float> w = {0.0123f, -0.0456f, 0.0789f, -0.1011f, 0.0002f, 0.0333f, -0.0666f, 0.0999f,
                          -0.0001f, 0.0500f, -0.0750f, 0.0250f, 0.1200f, -0.0125f, 0.0625f, -0.0875f};
  std::vector<float> second(16, 0.0f);
  second[0] = 0.5f;
  w.insert(w.end(), second.begin(), second.end());
  const Nvfp4Weight q = nvfp4_quantize(w.data(), 2, 16);
  uint32_t s2bits;
  std::memcpy(&s2bits, &q.global_scale, 4);
  EXPECT_EQ(s2bits, 0x39430C31u);
  EXPECT_EQ(q.block_scales[0], 0x6D);
  const uint8_t expected[8] = {0xC1, 0xF6, 0x30, 0x7D, 0x58, 0x3E, 0x97, 0xE5};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.packed[i], expected[i]) << i;
  std::vector<float> deq(32);
  nvfp4_dequantize(q.packed.data(), q.block_scales.data(), q.global_scale, 2, 16, deq.data());
  EXPECT_NEAR(deq[0], 0.0096726f, 1e-7);
  EXPECT_NEAR(deq[3], -0.1160714f, 1e-7);
  EXPECT_TRUE(std::signbit(deq[8]));  // -0.0001 -> nibble 8 (-0)
  EXPECT_EQ(deq[8], 0.0f);
  // Row dot with ones: sum(fp4 * 104) = 624, y = 624 * s2 -> bf16 0x3DEE
  float sum = 0;
  for (int i = 0; i < 16; ++i) sum += e2m1_to_f32(i % 2 ? q.packed[i / 2] >> 4 : q.packed[i / 2] & 0xF) * 104.0f;
  EXPECT_EQ(sum, 624.0f);
  EXPECT_EQ(f32_to_bf16(sum * q.global_scale), 0x3DEE);
}

TEST(Nvfp4, ScalesAreClampedAndFinite) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(64 * 128);
  for (auto& x : w) x = d(rng);
  for (int i = 0; i < 16; ++i) w[i] = 0.0f;  // an all-zero block gets scale 1.0 (ModelOpt)
  const Nvfp4Weight q = nvfp4_quantize(w.data(), 64, 128);
  for (uint8_t s : q.block_scales) {
    EXPECT_NE(s & 0x7F, 0x7F);
    EXPECT_EQ(s & 0x80, 0);
    EXPECT_GE(e4m3_to_f32(s), 0.001953125f);
  }
  // Every element dequantizes within half a step of its block.
  std::vector<float> deq(w.size());
  nvfp4_dequantize(q.packed.data(), q.block_scales.data(), q.global_scale, 64, 128, deq.data());
  for (size_t i = 0; i < w.size(); ++i) {
    const float step = e4m3_to_f32(q.block_scales[i / 16]) * q.global_scale;
    EXPECT_LE(std::fabs(deq[i] - w[i]), step * 1.0f + 1e-12f) << i;  // e2m1 gaps are at most 2 units
  }
}

TEST(Fp8Block, RoundTripWithPartialBlocks) {
  const int64_t rows = 200, cols = 300;  // not multiples of 128: ceil-div blocks
  std::mt19937 rng(2);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(rows * cols);
  for (auto& x : w) x = d(rng);
  const Fp8BlockWeight q = fp8_block_quantize(w.data(), rows, cols);
  ASSERT_EQ(q.scale_inv.size(), 2u * 3u);
  std::vector<float> deq(w.size());
  fp8_block_dequantize(q.data.data(), q.scale_inv.data(), rows, cols, deq.data());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(deq[i], w[i], std::fabs(w[i]) * 0.0625f + 1e-5f);
}

TEST(Int4Gptq, PackingLayoutIsAutoGptq) {
  // Output row n=0, one group (K = 128). amax = 7.5 makes the scale exactly 2*7.5/15 = 1, so the
  // codes are w + 8: k=0..7 hold 0..7 (codes 8..15), k=8..15 hold -7..0 (codes 1..8).
  const int64_t rows = 8, cols = 128;
  std::vector<float> w(rows * cols, 0.0f);
  for (int k = 0; k < 8; ++k) w[k] = static_cast<float>(k);
  for (int k = 8; k < 16; ++k) w[k] = static_cast<float>(k - 15);
  w[16] = 7.5f;  // ties to even: 7.5 + 8 = 15.5 -> 16 -> clamped to 15
  const Int4GptqWeight q = int4_gptq_quantize(w.data(), rows, cols);
  EXPECT_EQ(f16_to_f32(q.scales[0]), 1.0f);
  EXPECT_EQ(static_cast<uint32_t>(q.qweight[0 * rows + 0]), 0xFEDCBA98u);  // word i packs k = 8i..8i+7
  EXPECT_EQ(static_cast<uint32_t>(q.qweight[1 * rows + 0]), 0x87654321u);
  EXPECT_EQ(static_cast<uint32_t>(q.qweight[2 * rows + 0]) & 0xFu, 15u);
  EXPECT_TRUE(int4_gptq_zeros_are_symmetric(q.qzeros.data(), static_cast<int64_t>(q.qzeros.size())));
  std::vector<float> deq(w.size());
  int4_gptq_dequantize(q.qweight.data(), q.scales.data(), rows, cols, 128, deq.data());
  for (int k = 0; k < 16; ++k) EXPECT_EQ(deq[k], w[k]) << k;
  EXPECT_EQ(deq[16], 7.0f);
}

TEST(Int4Gptq, RoundTripErrorWithinHalfStep) {
  const int64_t rows = 16, cols = 256;
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(rows * cols);
  for (auto& x : w) x = d(rng);
  const Int4GptqWeight q = int4_gptq_quantize(w.data(), rows, cols);
  std::vector<float> deq(w.size());
  int4_gptq_dequantize(q.qweight.data(), q.scales.data(), rows, cols, 128, deq.data());
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k) {
      const float s = f16_to_f32(q.scales[(k / 128) * rows + n]);
      // Half a step, plus the f16 rounding of the scale magnified at the clamped extremes (7.5 steps).
      EXPECT_LE(std::fabs(deq[n * cols + k] - w[n * cols + k]), 0.51f * s);
    }
}

TEST(Int4Gptq, AsymmetricZerosAreDetected) {
  std::vector<int32_t> z = {0x77777777, 0x77777777};
  EXPECT_TRUE(int4_gptq_zeros_are_symmetric(z.data(), 2));
  z[1] = 0x77777776;
  EXPECT_FALSE(int4_gptq_zeros_are_symmetric(z.data(), 2));
}

}  // namespace
}  // namespace fp4serve
