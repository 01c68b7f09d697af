// The scalar rules of the CUDA sampling kernel, written once for the device and the host: the
// kernel (sampling_cuda.cu) calls them per token, and the CPU unit tests call them in a sequential
// model of the kernel's selection (tests/unit/kernels/cuda_sampling_model.h) that is checked against
// the CPU op's selection (cpu/sampling_selection.cpp) on random rows. Every rule here mirrors a line
// of the CPU op in float32 (no FMA: nvcc runs with --fmad=false, g++ with -ffp-contract=off).
//
// The random path works on integer masses: a kept token's weight w = exp(s - max_scaled) in (0, 1]
// becomes round(w * 2^shift) (fixed_mass). Integer sums are exact whatever their order, so the
// kernel may add them with shared-memory atomics and still give bit-identical results on every run
// and in every batch (no floating-point atomics), and the sums match the CPU's double sums of the
// same float weights (bit-identical: exp_f32) within (tokens * 2^-shift) absolute: far inside the
// contract's relative 1e-5.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/moe_math.h"

#if defined(__CUDACC__)
#define FP4_SAMPLING_HD __host__ __device__ __forceinline__
#else
#define FP4_SAMPLING_HD inline
#endif

namespace fp4serve::kernels::cuda::sampling_rules {

// Top-p without top-k walks buckets of 1/16 nat below the max, as the CPU op does
// (cpu/sampling_selection.cpp nucleus_by_buckets): same bucket function, same count.
inline constexpr float kBucketsPerNat = 16.0f;
inline constexpr int kNumBuckets = 104 * 16 + 2;

// Bits of the fixed-point masses for a row of `valid` tokens: the sum of all weights (each <= 1)
// stays below 2^63, and as many fraction bits as that allows, at most 44.
FP4_SAMPLING_HD int fixed_mass_shift(int64_t valid) {
  int bits = 0;
  while ((int64_t{1} << bits) <= valid && bits < 62) ++bits;  // valid < 2^bits
  const int shift = 63 - bits;
  return shift < 44 ? shift : 44;
}

// round(w * scale) for a weight w in [0, 1]; scale = 2^shift.
FP4_SAMPLING_HD uint64_t fixed_mass(float w, double scale) {
  return static_cast<uint64_t>(static_cast<double>(w) * scale + 0.5);
}

// expf as the CPU's glibc computes it, bit for bit: glibc's algorithm in the same double operations
// (moe_math.h; neither CUDA's expf, up to 2 ulp off, nor exp() in double rounded once, which is
// the correctly rounded value and not always glibc's). So every weight is the CPU op's float.
FP4_SAMPLING_HD float exp_f32(float x) { return moe::exp_f32(x); }

FP4_SAMPLING_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
FP4_SAMPLING_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// A key whose unsigned order is the floats' order (-0 and +0 the same key, as they compare equal).
FP4_SAMPLING_HD uint32_t order_key(float f) {
  if (f == 0.0f) f = 0.0f;
  const uint32_t u = float_bits(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
FP4_SAMPLING_HD float key_float(uint32_t k) { return bits_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// min_p as the CPU's MinPFilter: drop a token when exp(scaled - max_scaled) < min_p; exp() only
// near the boundary (log_min_p is the host's logf(min_p), passed in, so the band is the CPU's).
struct MinP {
  bool on = false;
  float min_p = 0.0f;
  float log_min_p = 0.0f;
  float max_scaled = 0.0f;

  FP4_SAMPLING_HD bool keeps(float scaled) const {
    if (!on) return true;
    const float d = scaled - max_scaled;
    if (d > log_min_p + 0.01f) return true;
    if (d < log_min_p - 0.01f) return false;
    return exp_f32(d) >= min_p;
  }
};

// The CPU's bucket of a scaled logit (monotonic: a higher logit never gets a higher bucket).
FP4_SAMPLING_HD int bucket_of(float scaled, float max_scaled) {
  const float d = (max_scaled - scaled) * kBucketsPerNat;
  return d < static_cast<float>(kNumBuckets - 1) ? static_cast<int>(d) : kNumBuckets - 1;
}

// Top-k's re-check band below the k-th largest raw logit (the CPU's band_low): scaling by the
// temperature can merge a raw value just below the k-th into a tie with it.
FP4_SAMPLING_HD float top_k_band_low(float kth_raw) { return kth_raw - (fabsf(kth_raw) * 0x1p-20f + 1e-30f); }

// Top-k's kept set, given the k-th largest raw logit (min_p's drops counted as -inf): the CPU's
// test per token, on its processed logit p.
FP4_SAMPLING_HD bool top_k_keeps(float p, float temperature, float band_low, float kth_scaled, const MinP& min_p) {
  if (!(p >= band_low)) return false;
  const float s = p / temperature;
  return !(s < kth_scaled) && s != -INFINITY && min_p.keeps(s);
}

// The integer threshold of top-p over kept mass `total`: a token is kept while the mass ranked
// above it is < top_p * total (the CPU's append_nucleus), i.e. the kept prefix ends at the first
// token whose cumulative mass is > the returned value.
FP4_SAMPLING_HD uint64_t top_p_threshold(double top_p, uint64_t total) {
  const double t = ceil(top_p * static_cast<double>(total));
  if (!(t >= 1.0)) return 0;  // top_p * total <= 0: the top token alone
  const double limit = static_cast<double>(total);
  return static_cast<uint64_t>(t < limit ? t : limit) - 1;
}

// The draw's target in [0, total): the token whose cumulative mass (in the walk's order) first
// exceeds it is drawn (the CPU's draw_candidate: cum > u * total).
FP4_SAMPLING_HD uint64_t draw_target(double u, uint64_t total) {
  if (total == 0) return 0;
  const auto t = static_cast<uint64_t>(u * static_cast<double>(total));
  return t < total ? t : total - 1;
}

}  // namespace fp4serve::kernels::cuda::sampling_rules
