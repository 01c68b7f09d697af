// Shared helpers for the kernel tests: random data in each storage format, and a loop over every
// ISA path this machine can run.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "tensor/float_formats.h"

namespace fp4serve::kernels::test {

inline std::vector<float> random_f32(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Random values already rounded to bf16 (what activations look like).
inline std::vector<float> random_bf16_values(size_t n, uint32_t seed, float scale = 1.0f) {
  auto v = random_f32(n, seed, scale);
  for (auto& x : v) x = round_bf16(x);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = f32_to_bf16_bits(v[i]);
  return b;
}

inline std::vector<float> from_bf16(const std::vector<uint16_t>& b) {
  std::vector<float> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = bf16_bits_to_f32(b[i]);
  return v;
}

inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed, int lo = 0, int hi = 255) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(d(rng));
  return v;
}

// Random e4m3 codes without NaN (0x7F / 0xFF).
inline std::vector<uint8_t> random_e4m3(size_t n, uint32_t seed) {
  auto v = random_bytes(n, seed);
  for (auto& b : v)
    if ((b & 0x7F) == 0x7F) b ^= 0x01;
  return v;
}

inline bool same_bits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

inline std::vector<cpu::Isa> isas() { return cpu::supported_isas(); }

// scalar, avx2 and avx512 are bit-identical to each other; avx512_bf16 runs linear on bf16
// products (kernel_table.h) and is held to a tolerance instead, and to bit-identity with itself.
inline bool bit_exact_with_scalar(cpu::Isa isa) { return isa != cpu::Isa::kAvx512Bf16; }

// The avx512_bf16 linear contract: |y - scalar| <= kBf16TierRelTol * sum_k |x*w| + kBf16TierAbsTol.
constexpr double kBf16TierRelTol = 1e-5;
constexpr double kBf16TierAbsTol = 1e-30;

}  // namespace fp4serve::kernels::test
