// Fast deterministic random numbers for `fp4serve synth`: billions of weights must be drawn in
// seconds on a few cores, and the bytes must depend only on (--seed, tensor name, row), never on the
// thread count or on the order in which tensors are written. So every row of every tensor has its
// own generator, seeded by mixing the tensor's seed with the row index (splitmix64), and drawing is
// xoshiro256+ with a 256-layer ziggurat for normals (Marsaglia & Tsang 2000): one 64-bit draw, one
// table lookup and one compare for ~99 % of the values.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace fp4serve::synth {

// splitmix64 step: the standard seeding mixer (Steele, Lea, Flood 2014).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 64-bit FNV-1a of a name, mixed with the user's seed: the seed of one tensor's values.
uint64_t name_seed(uint64_t seed, std::string_view name);

class Xoshiro256Plus {
 public:
  explicit Xoshiro256Plus(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& w : s_) w = splitmix64(sm);
  }
  // The generator of row `row` of the tensor seeded `tensor_seed`.
  static Xoshiro256Plus for_row(uint64_t tensor_seed, uint64_t row) {
    uint64_t sm = tensor_seed ^ (row * 0xD1B54A32D192ED03ull);
    return Xoshiro256Plus(splitmix64(sm));
  }

  uint64_t next() {
    const uint64_t result = s_[0] + s_[3];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = (s_[3] << 45) | (s_[3] >> 19);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits (the low bits of xoshiro256+ are weak; these are not used).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1): never 0, for logarithms.
  double uniform_open() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  // Standard normal N(0, 1) by the ziggurat, in double precision.
  double normal();
  // Two standard normals from one 64-bit draw in the common case (each from 32 bits: 8 for the
  // layer, 24 for the uniform), in float: the weights are rounded to bf16 (8 significant bits), so
  // 24-bit uniforms lose nothing, and this is what makes synth fast.
  inline void normal_pair(float& a, float& b);

 private:
  float normal_slow(uint32_t bits);  // wedge and tail cases
  uint64_t s_[4];
};

// Float ziggurat tables (256 layers, Marsaglia & Tsang): zig_x[i] is the right edge of layer i
// (zig_x[0] the base layer's virtual width, zig_x[1] = R, zig_x[256] = 0), zig_f[i] = pdf(zig_x[i]).
struct ZigguratTables {
  float x[257];
  float f[257];
};
extern const ZigguratTables kZiggurat;

inline void Xoshiro256Plus::normal_pair(float& a, float& b) {
  const uint64_t bits = next();
  const auto lo = static_cast<uint32_t>(bits), hi = static_cast<uint32_t>(bits >> 32);
  // u in (-1, 1) from the top 24 bits, layer from the low 8.
  const float ua = static_cast<float>(static_cast<int32_t>(lo) >> 8) * 0x1.0p-23f;
  const float ub = static_cast<float>(static_cast<int32_t>(hi) >> 8) * 0x1.0p-23f;
  const uint32_t ia = lo & 0xFF, ib = hi & 0xFF;
  a = ua * kZiggurat.x[ia];
  b = ub * kZiggurat.x[ib];
  if (!(std::fabs(a) < kZiggurat.x[ia + 1])) a = normal_slow(lo);
  if (!(std::fabs(b) < kZiggurat.x[ib + 1])) b = normal_slow(hi);
}

}  // namespace fp4serve::synth
