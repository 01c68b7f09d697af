// Exhaustive tests of the narrow float formats. Expected values come from an independent decoding
// written here from the OCP/ONNX definitions (bit fields -> ldexp), and from the worked values of
// docs/quant-formats.md §6.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tensor/float_formats.h"

namespace fp4serve {
namespace {

double ref_decode(uint32_t bits, int ebits, int mbits, int bias) {
  const uint32_t sign = bits >> (ebits + mbits);
  const uint32_t e = (bits >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = bits & ((1u << mbits) - 1);
  double mag = e == 0 ? std::ldexp(m / double(1u << mbits), 1 - bias)
                      : std::ldexp(1.0 + m / double(1u << mbits), int(e) - bias);
  return sign ? -mag : mag;
}

uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

TEST(FloatFormats, E4M3AllCodes) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << c;
      EXPECT_EQ(f32_to_e4m3(v), 0x7F);
      continue;
    }
    EXPECT_EQ(v, ref_decode(c, 4, 3, 7)) << "code " << c;
    EXPECT_EQ(std::signbit(v), (c & 0x80) != 0) << c;
    EXPECT_EQ(f32_to_e4m3(v), c) << "round trip of code " << c;
  }
}

TEST(FloatFormats, E5M2AllCodes) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float v = e5m2_to_f32(static_cast<uint8_t>(c));
    const uint32_t e = (c >> 2) & 0x1F;
    if (e == 31) {
      if (c & 3) EXPECT_TRUE(std::isnan(v)) << c;
      else EXPECT_EQ(v, (c & 0x80) ? -INFINITY : INFINITY);
      continue;
    }
    EXPECT_EQ(v, ref_decode(c, 5, 2, 15)) << "code " << c;
    EXPECT_EQ(f32_to_e5m2(v), c) << "round trip of code " << c;
  }
}

TEST(FloatFormats, E4M3SpecValues) {
  struct { uint8_t code; float value; } cases[] = {
      {0x00, 0.0f}, {0x01, 0.001953125f}, {0x07, 0.013671875f}, {0x08, 0.015625f}, {0x30, 0.5f},
      {0x38, 1.0f}, {0x3C, 1.5f}, {0x40, 2.0f}, {0x48, 4.0f}, {0x5D, 26.0f}, {0x6D, 104.0f},
      {0x7A, 320.0f}, {0x7E, 448.0f}, {0xB8, -1.0f}, {0xFE, -448.0f}};
  for (auto c : cases) EXPECT_EQ(e4m3_to_f32(c.code), c.value) << int(c.code);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
  EXPECT_TRUE(std::signbit(e4m3_to_f32(0x80)));
}

TEST(FloatFormats, E5M2SpecValues) {
  EXPECT_EQ(e5m2_to_f32(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(e5m2_to_f32(0x04), std::ldexp(1.0f, -14));
  EXPECT_EQ(e5m2_to_f32(0x3C), 1.0f);
  EXPECT_EQ(e5m2_to_f32(0x40), 2.0f);
  EXPECT_EQ(e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(e5m2_to_f32(0x7C), INFINITY);
  EXPECT_TRUE(std::isnan(e5m2_to_f32(0x7D)));
  EXPECT_EQ(e5m2_to_f32(0xBC), -1.0f);
}

// Between each pair of adjacent positive codes, the midpoint rounds to the even code, and points
// just either side of it round to the nearer code.
void check_rounding(uint8_t (*enc)(float), float (*dec)(uint8_t), uint32_t last_finite) {
  for (uint32_t c = 0; c < last_finite; ++c) {
    const double lo = dec(static_cast<uint8_t>(c)), hi = dec(static_cast<uint8_t>(c + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(double(mid), (lo + hi) / 2) << "midpoint must be exact in fp32";
    const uint32_t even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(enc(mid), even) << "tie between codes " << c << " and " << c + 1;
    EXPECT_EQ(enc(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(enc(std::nextafter(mid, INFINITY)), c + 1);
    EXPECT_EQ(enc(-mid), 0x80 | even);
  }
}

TEST(FloatFormats, E4M3RoundsToNearestEven) { check_rounding(f32_to_e4m3, e4m3_to_f32, 0x7D); }
TEST(FloatFormats, E5M2RoundsToNearestEven) { check_rounding(f32_to_e5m2, e5m2_to_f32, 0x7A); }

TEST(FloatFormats, Fp8Saturates) {
  EXPECT_EQ(f32_to_e4m3(500.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-1e30f), 0xFE);
  EXPECT_EQ(f32_to_e4m3(INFINITY), 0x7E);
  EXPECT_EQ(f32_to_e5m2(1e6f), 0x7B);
  EXPECT_EQ(f32_to_e5m2(-INFINITY), 0xFB);
  EXPECT_EQ(f32_to_e4m3(NAN), 0x7F);
}

TEST(FloatFormats, Fp8KvExamplesFromSpec) {
  // docs/quant-formats.md §6.4
  EXPECT_EQ(f32_to_e4m3(1.296875f), 0x3A);
  EXPECT_EQ(e4m3_to_f32(0x3A), 1.25f);
  EXPECT_EQ(f32_to_e4m3(1.296875f / 0.5f), 0x42);
  EXPECT_EQ(f32_to_e4m3(-0.0009f), 0x80);
  EXPECT_EQ(f32_to_e4m3(0.06982421875f), 0x19);
  EXPECT_EQ(e4m3_to_f32(0x19), 0.0703125f);
  EXPECT_EQ(f32_to_e4m3(3.296875f * 50.0f), 0x72);
  EXPECT_EQ(f32_to_e4m3(0.00099945f * 50.0f), 0x15);
}

TEST(FloatFormats, E2M1AllCodes) {
  const float expected[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (uint8_t n = 0; n < 16; ++n) {
    EXPECT_EQ(e2m1_to_f32(n), expected[n]) << int(n);
    EXPECT_EQ(std::signbit(e2m1_to_f32(n)), n >= 8);
    if (n != 8) EXPECT_EQ(f32_to_e2m1(expected[n]), n) << "round trip " << int(n);
  }
  // ModelOpt sets the sign bit from `x < 0`, so -0.0 itself encodes as +0 (nibble 0) while a tiny
  // negative value that rounds to zero keeps it (nibble 8).
  EXPECT_EQ(f32_to_e2m1(-0.0f), 0);
  EXPECT_EQ(f32_to_e2m1(-0.1f), 8);
}

TEST(FloatFormats, E2M1RoundingMatchesModelOpt) {
  // ModelOpt _cast_fp4 / vLLM cast_to_fp4 boundaries: ties go to the even code.
  struct { float x; uint8_t code; } cases[] = {
      {0.25f, 0}, {0.2501f, 1}, {0.75f, 2}, {0.7499f, 1}, {1.25f, 2}, {1.2501f, 3}, {1.75f, 4},
      {2.5f, 4}, {2.5001f, 5}, {3.5f, 6}, {5.0f, 6}, {5.0001f, 7}, {5.5f, 7}, {100.0f, 7},
      {-0.0001f, 8}, {-5.5f, 15}, {INFINITY, 7}};
  for (auto c : cases) EXPECT_EQ(f32_to_e2m1(c.x), c.code) << c.x;
}

TEST(FloatFormats, Bf16AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float v = bf16_to_f32(static_cast<uint16_t>(c));
    EXPECT_EQ(f32_bits(v), c << 16);
    if (!std::isnan(v)) EXPECT_EQ(f32_to_bf16(v), c) << c;
  }
}

TEST(FloatFormats, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // overflows to Inf as torch does
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  // Spec 6.1: -2.2321429569e-3 -> 0xBB12 ; 3.7202381645e-4 -> 0x39C3
  EXPECT_EQ(f32_to_bf16(-2.2321429569e-3f), 0xBB12);
  EXPECT_EQ(f32_to_bf16(3.7202381645e-4f), 0x39C3);
}

TEST(FloatFormats, F16AllCodesRoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float v = f16_to_f32(static_cast<uint16_t>(c));
    const uint32_t e = (c >> 10) & 0x1F, m = c & 0x3FF;
    if (e == 31 && m) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    if (e == 31) {
      EXPECT_EQ(v, (c & 0x8000) ? -INFINITY : INFINITY);
    } else {
      EXPECT_EQ(v, ref_decode(c, 5, 10, 15)) << c;
    }
    EXPECT_EQ(f32_to_f16(v), c) << c;
  }
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
}

}  // namespace
}  // namespace fp4serve
