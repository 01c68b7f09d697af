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
#include "kernels/weights.h"
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

// scalar, avx2 and avx512 are bit-identical to each other; avx512_bf16 and amx run linear on bf16
// products (kernel_table.h) and are held to a tolerance instead, and to bit-identity with themselves.
inline bool bit_exact_with_scalar(cpu::Isa isa) { return isa < cpu::Isa::kAvx512Bf16; }

// The avx512_bf16 linear contract: |y - scalar| <= kBf16TierRelTol * sum_k |x*w| + kBf16TierAbsTol.
constexpr double kBf16TierRelTol = 1e-5;
constexpr double kBf16TierAbsTol = 1e-30;

// A random weight of each storage format (its storage plus the view over it); kFp8Block* differ in
// the scale_inv dtype. Shared by the linear tests of every ISA tier.
struct RandomWeight {
  std::vector<uint16_t> u16;
  std::vector<uint8_t> u8, u8b;
  std::vector<int32_t> i32;
  std::vector<float> f32;
  Int4Packed int4;
  WeightView view;
};

enum class WeightKind { kBf16, kFp8Tensor, kFp8BlockF32, kFp8BlockBf16, kNvfp4, kInt4Packed, kInt4Gptq };

inline const char* kind_name(WeightKind k) {
  switch (k) {
    case WeightKind::kBf16: return "bf16";
    case WeightKind::kFp8Tensor: return "fp8_tensor";
    case WeightKind::kFp8BlockF32: return "fp8_block_f32";
    case WeightKind::kFp8BlockBf16: return "fp8_block_bf16";
    case WeightKind::kNvfp4: return "nvfp4";
    case WeightKind::kInt4Packed: return "int4_packed";
    case WeightKind::kInt4Gptq: return "int4_gptq";
  }
  return "?";
}

inline bool fits(WeightKind f, int64_t k) {
  if (f == WeightKind::kNvfp4) return k % 16 == 0;
  if (f == WeightKind::kInt4Gptq || f == WeightKind::kInt4Packed) return k % 128 == 0;
  return true;
}

// scale_lo/hi: the e4m3 block-scale code range for NVFP4 (0x00 = zero, 0x01..0x07 subnormal).
inline RandomWeight make_random_weight(WeightKind f, int64_t n, int64_t k, uint32_t seed, int scale_lo = 0x01,
                                       int scale_hi = 0x5F) {
  RandomWeight r;
  switch (f) {
    case WeightKind::kBf16:
      r.u16 = to_bf16(random_f32(n * k, seed, 0.1f));
      r.view = bf16_weight(r.u16.data(), n, k);
      break;
    case WeightKind::kFp8Tensor:
      r.u8 = random_e4m3(n * k, seed);
      r.view = fp8_tensor_weight(r.u8.data(), 0.0123f, n, k);
      break;
    case WeightKind::kFp8BlockF32:
    case WeightKind::kFp8BlockBf16: {
      r.u8 = random_e4m3(n * k, seed);
      const int64_t sn = (n + 127) / 128, sk = (k + 127) / 128;
      r.f32 = random_f32(sn * sk, seed + 1, 0.01f);
      for (auto& s : r.f32) s = std::fabs(s) + 1e-4f;
      if (f == WeightKind::kFp8BlockBf16) {
        r.u16 = to_bf16(r.f32);
        r.view = fp8_block_weight(r.u8.data(), r.u16.data(), true, n, k);
      } else {
        r.view = fp8_block_weight(r.u8.data(), r.f32.data(), false, n, k);
      }
      break;
    }
    case WeightKind::kNvfp4:
      r.u8 = random_bytes(n * k / 2, seed);
      r.u8b = random_bytes(n * k / 16, seed + 1, scale_lo, scale_hi);
      r.view = nvfp4_weight(r.u8.data(), r.u8b.data(), 3.1e-4f, n, k);
      break;
    case WeightKind::kInt4Gptq:
    case WeightKind::kInt4Packed: {
      auto bytes = random_bytes(k / 8 * n * 4, seed);
      r.i32.resize(k / 8 * n);
      std::memcpy(r.i32.data(), bytes.data(), bytes.size());
      auto s = random_f32(k / 128 * n, seed + 1, 0.02f);
      r.u16.resize(s.size());
      for (size_t i = 0; i < s.size(); ++i) r.u16[i] = f32_to_f16(std::fabs(s[i]) + 1e-3f);
      r.view = int4_gptq_weight(r.i32.data(), r.u16.data(), n, k, 128);
      if (f == WeightKind::kInt4Packed) {
        r.int4 = int4_repack(r.view);
        r.view = r.int4.view();
      }
      break;
    }
  }
  return r;
}

}  // namespace fp4serve::kernels::test
