#include "tensor/float_formats.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace fp4serve {
namespace {

uint32_t f32_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float bits_f32(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// A sign-magnitude float with `ebits` exponent bits (bias `bias`) and `mbits` mantissa bits.
// Decoding ignores the format's special encodings; callers handle NaN/Inf codes first.
double decode_finite(uint32_t exp_field, uint32_t man_field, int mbits, int bias) {
  if (exp_field == 0) return std::ldexp(static_cast<double>(man_field), 1 - bias - mbits);
  return std::ldexp(static_cast<double>((1u << mbits) | man_field), static_cast<int>(exp_field) - bias - mbits);
}

// Encodes |a| (finite, >= 0) with round-to-nearest-even and saturation to max_finite.
// Returns the magnitude bits (exponent << mbits | mantissa). The arithmetic is in double, where
// every step below is exact for fp32 inputs.
uint32_t encode_magnitude(double a, int mbits, int bias, double max_finite) {
  const int emin = 1 - bias;  // exponent of the smallest normal
  if (a == 0.0) return 0;
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exp = e - 1;    // a = 1.x * 2^exp
  if (exp < emin) exp = emin;
  const double quantum = std::ldexp(1.0, exp - mbits);
  double r = std::nearbyint(a / quantum) * quantum;  // default rounding mode: ties to even
  if (r > max_finite) r = max_finite;
  if (r == 0.0) return 0;
  std::frexp(r, &e);
  exp = e - 1;
  if (exp < emin) {  // subnormal
    return static_cast<uint32_t>(std::ldexp(r, bias - 1 + mbits));
  }
  const uint32_t man = static_cast<uint32_t>(std::ldexp(r, mbits - exp)) - (1u << mbits);
  return (static_cast<uint32_t>(exp + bias) << mbits) | man;
}

constexpr double kE4M3Max = 448.0;
constexpr double kE5M2Max = 57344.0;
constexpr double kE2M1Max = 6.0;

struct Tables {
  std::array<float, 256> e4m3{};
  std::array<float, 256> e5m2{};
  std::array<float, 16> e2m1{};
  Tables() {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (uint32_t b = 0; b < 256; ++b) {
      const float sign = (b & 0x80) ? -1.0f : 1.0f;
      // e4m3fn: S.EEEE.MMM; only S.1111.111 is NaN.
      if ((b & 0x7F) == 0x7F) {
        e4m3[b] = nan;
      } else {
        e4m3[b] = sign * static_cast<float>(decode_finite((b >> 3) & 0xF, b & 0x7, 3, 7));
      }
      // e5m2: S.EEEEE.MM; exponent 31 is Inf (mantissa 0) or NaN.
      const uint32_t e5 = (b >> 2) & 0x1F;
      if (e5 == 31) {
        e5m2[b] = (b & 0x3) ? nan : sign * inf;
      } else {
        e5m2[b] = sign * static_cast<float>(decode_finite(e5, b & 0x3, 2, 15));
      }
    }
    for (uint32_t n = 0; n < 16; ++n) {
      const float sign = (n & 0x8) ? -1.0f : 1.0f;
      e2m1[n] = sign * static_cast<float>(decode_finite((n >> 1) & 0x3, n & 0x1, 1, 1));
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t man = h & 0x3FF;
  if (exp == 0x1F) return bits_f32(sign | 0x7F800000u | (man << 13));  // Inf / NaN
  const double mag = decode_finite(exp, man, 10, 15);
  const float f = static_cast<float>(mag);
  return sign ? -f : f;
}

uint16_t f32_to_f16(float x) {
  const uint16_t sign = (f32_bits(x) >> 16) & 0x8000;
  if (std::isnan(x)) return sign | 0x7E00;
  const double a = std::fabs(static_cast<double>(x));
  // IEEE overflow: values that round above 65504 become Inf. The rounding threshold is 65520.
  if (a >= 65520.0) return sign | 0x7C00;
  return sign | static_cast<uint16_t>(encode_magnitude(a, 10, 15, 65504.0));
}

float e4m3_to_f32(uint8_t bits) { return tables().e4m3[bits]; }

uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::isinf(x) ? kE4M3Max : std::fabs(static_cast<double>(x));
  return sign | static_cast<uint8_t>(encode_magnitude(a, 3, 7, kE4M3Max));
}

float e5m2_to_f32(uint8_t bits) { return tables().e5m2[bits]; }

uint8_t f32_to_e5m2(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::isinf(x) ? kE5M2Max : std::fabs(static_cast<double>(x));
  return sign | static_cast<uint8_t>(encode_magnitude(a, 2, 15, kE5M2Max));
}

float e2m1_to_f32(uint8_t nibble) { return tables().e2m1[nibble & 0xF]; }

uint8_t f32_to_e2m1(float x) {
  const uint8_t sign = (x < 0.0f) ? 0x8 : 0x0;
  const double a = std::isnan(x) ? 0.0 : std::fabs(static_cast<double>(x));
  return sign | static_cast<uint8_t>(encode_magnitude(std::isinf(x) ? kE2M1Max : a, 1, 1, kE2M1Max));
}

const float* e4m3_table() { return tables().e4m3.data(); }
const float* e5m2_table() { return tables().e5m2.data(); }
const float* e2m1_table() { return tables().e2m1.data(); }

}  // namespace fp4serve
