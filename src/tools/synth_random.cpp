#include "tools/synth_random.h"

#include <cmath>

namespace fp4serve::synth {
namespace {

// 256-layer ziggurat for the standard normal (the constants of Marsaglia & Tsang's 256-box
// version): R is the start of the tail, V the area of every layer.
constexpr double kR = 3.6541528853610088;
constexpr double kV = 0.00492867323399;

double pdf(double x) { return std::exp(-0.5 * x * x); }

// x[0] is the virtual width of the base layer (V / f(R)), x[1] = R, each next edge is where the
// layer above has area V, and x[256] = 0. f[i] = pdf(x[i]).
struct Ziggurat {
  double x[257];
  double f[257];
  Ziggurat() {
    x[0] = kV / pdf(kR);
    x[1] = kR;
    for (int i = 2; i < 256; ++i) x[i] = std::sqrt(-2.0 * std::log(kV / x[i - 1] + pdf(x[i - 1])));
    x[256] = 0.0;
    for (int i = 0; i < 257; ++i) f[i] = pdf(x[i]);
  }
};

const Ziggurat& table() {
  static const Ziggurat z;
  return z;
}

ZigguratTables make_float_tables() {
  ZigguratTables t;
  const Ziggurat& z = table();
  for (int i = 0; i < 257; ++i) {
    t.x[i] = static_cast<float>(z.x[i]);
    t.f[i] = static_cast<float>(z.f[i]);
  }
  return t;
}

}  // namespace

const ZigguratTables kZiggurat = make_float_tables();

float Xoshiro256Plus::normal_slow(uint32_t bits) {
  for (;;) {
    const uint32_t i = bits & 0xFF;
    const float u = static_cast<float>(static_cast<int32_t>(bits) >> 8) * 0x1.0p-23f;
    const float x = u * kZiggurat.x[i];
    if (std::fabs(x) < kZiggurat.x[i + 1]) return x;
    if (i == 0) {
      double tx, ty;
      do {
        tx = std::log(uniform_open()) / kR;
        ty = std::log(uniform_open());
      } while (-2.0 * ty < tx * tx);
      return static_cast<float>(u < 0 ? tx - kR : kR - tx);
    }
    if (kZiggurat.f[i + 1] + (kZiggurat.f[i] - kZiggurat.f[i + 1]) * static_cast<float>(uniform()) <
        std::exp(-0.5f * x * x)) {
      return x;
    }
    bits = static_cast<uint32_t>(next() >> 32);
  }
}

uint64_t name_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  uint64_t sm = h ^ (seed * 0x9E3779B97F4A7C15ull);
  return splitmix64(sm);
}

double Xoshiro256Plus::normal() {
  const Ziggurat& z = table();
  for (;;) {
    const uint64_t bits = next();
    const int i = static_cast<int>(bits & 0xFF);
    // Symmetric uniform in (-1, 1) from the top 53 bits.
    const double u = 2.0 * (static_cast<double>(bits >> 11) * 0x1.0p-53) - 1.0;
    const double x = u * z.x[i];
    if (std::fabs(x) < z.x[i + 1]) return x;  // inside the layer's rectangle: the common case
    if (i == 0) {
      // The tail beyond R (Marsaglia 1964).
      double tx, ty;
      do {
        tx = std::log(uniform_open()) / kR;
        ty = std::log(uniform_open());
      } while (-2.0 * ty < tx * tx);
      return u < 0 ? tx - kR : kR - tx;
    }
    // The wedge between the rectangle and the curve.
    if (z.f[i + 1] + (z.f[i] - z.f[i + 1]) * uniform() < pdf(x)) return x;
  }
}

}  // namespace fp4serve::synth
